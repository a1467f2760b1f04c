package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import csi.v1.Csi.ControllerServiceCapability;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.testing.BoundExport;
import dev.strata.csi.testing.FileTrees;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.SortedMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Snapshots, restores and clones of NFS volumes through controller-server as a process, on a real
 * export directory bind-mounted where the controller looks for the export (as NfsTest does: this
 * kernel has no NFS client, and everything the controller does happens in the export's files).
 * Every file of a volume is compared by type, mode, owner, checksum, time and links
 * ({@link FileTrees}).
 */
@Tag("root")
class NfsSnapshotTest {

    static final String SERVER = "nfs.example";
    static final String SHARE = "/srv/share";
    static final long MIB = 1L << 20;

    @TempDir
    static Path dir;

    static Cluster cluster;
    static Path exportData;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        BoundExport export = BoundExport.bind(dir, SERVER, SHARE);
        exportData = export.data();
        Path exportRoot = export.root();
        cluster = Cluster.start(dir, List.of("--agent-plaintext", "true"),
                List.of("--nfs-export-root", exportRoot.toString(), "--nfs-mount-exports", "false"), Map.of());
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        SystemState.cleanUp(dir);
    }

    @Test
    void restoreShowsTheSnapshotCloneTheSourceAndTheSnapshotOutlivesItsSource() throws Exception {
        Volume source = create(request("pvc-source", 64 * MIB));
        Path data = exportData.resolve("pvc-source");
        writeTree(data, 1);
        SortedMap<String, String> atSnapshot = FileTrees.describe(data);

        Instant before = Instant.now().minusSeconds(1);
        Snapshot snapshot = snapshot("snap-1", source.getVolumeId());
        assertTrue(snapshot.getReadyToUse());
        assertEquals(source.getVolumeId(), snapshot.getSourceVolumeId());
        assertEquals(64 * MIB, snapshot.getSizeBytes(), "the restore size is the source's capacity");
        assertTrue(snapshot.getCreationTime().getSeconds() >= before.getEpochSecond(), snapshot.toString());
        assertTrue(snapshot.getSnapshotId().startsWith("nfs-snapshot/nfs.example/"), snapshot.getSnapshotId());
        assertEquals(snapshot, snapshot("snap-1", source.getVolumeId()), "the same name and source: the same snapshot");

        changeTree(data);
        SortedMap<String, String> changed = FileTrees.describe(data);
        assertNotEquals(atSnapshot, changed);

        create(request("pvc-restored", 64 * MIB).setVolumeContentSource(fromSnapshot(snapshot.getSnapshotId())));
        assertEquals(atSnapshot, FileTrees.describe(exportData.resolve("pvc-restored")), "the restore holds the snapshot's content");
        Volume clone = create(request("pvc-clone", 64 * MIB).setVolumeContentSource(fromVolume(source.getVolumeId())));
        assertEquals(changed, FileTrees.describe(exportData.resolve("pvc-clone")), "the clone holds the source's current content");
        assertEquals(clone, create(request("pvc-clone", 64 * MIB).setVolumeContentSource(fromVolume(source.getVolumeId()))),
                "the same request again: the same volume");

        assertEquals(List.of(snapshot), cluster.controller().listSnapshots(ListSnapshotsRequest.newBuilder()
                .setSourceVolumeId(source.getVolumeId()).build()).getEntriesList().stream().map(e -> e.getSnapshot()).toList());
        assertEquals(List.of(snapshot), cluster.controller().listSnapshots(ListSnapshotsRequest.newBuilder()
                .setSnapshotId(snapshot.getSnapshotId()).build()).getEntriesList().stream().map(e -> e.getSnapshot()).toList());

        delete(source.getVolumeId());
        assertFalse(Files.exists(data));
        create(request("pvc-restored-after", 64 * MIB).setVolumeContentSource(fromSnapshot(snapshot.getSnapshotId())));
        assertEquals(atSnapshot, FileTrees.describe(exportData.resolve("pvc-restored-after")),
                "the snapshot restores after its source volume is deleted");

        for (String name : List.of("pvc-restored", "pvc-clone", "pvc-restored-after")) {
            delete(volumeId(name));
        }
        deleteSnapshot(snapshot.getSnapshotId());
        deleteSnapshot(snapshot.getSnapshotId());
        assertEquals(0, cluster.controller().listSnapshots(ListSnapshotsRequest.getDefaultInstance()).getEntriesCount());
        assertDriverAreaHoldsNoCopy();
    }

    @Test
    void theSnapshotterAndProvisionerGetTheCodesTheyActOn() throws Exception {
        Volume source = create(request("pvc-codes", 0));
        Volume other = create(request("pvc-codes-other", 0));
        Files.writeString(exportData.resolve("pvc-codes/file"), "x".repeat(5000));
        Snapshot snapshot = snapshot("snap-codes", source.getVolumeId());
        assertEquals(5000, snapshot.getSizeBytes(), "without a capacity, the restore size is the data's");

        assertCode(Status.Code.ALREADY_EXISTS, () -> snapshot("snap-codes", other.getVolumeId()));
        assertCode(Status.Code.NOT_FOUND, () -> snapshot("snap-static", "a-static-volume-handle"));
        assertCode(Status.Code.NOT_FOUND, () -> snapshot("snap-gone", volumeId("pvc-never-made")));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder()
                .setName("snap-parameters").setSourceVolumeId(source.getVolumeId()).putParameters("compress", "yes").build()));

        String snapshotId = snapshot.getSnapshotId();
        create(request("pvc-codes-clone", 0).setVolumeContentSource(fromSnapshot(snapshotId)));
        assertEquals("x".repeat(5000), Files.readString(exportData.resolve("pvc-codes-clone/file")));
        assertCode(Status.Code.ALREADY_EXISTS, () -> create(request("pvc-codes-clone", 0).setVolumeContentSource(fromVolume(source.getVolumeId()))));
        assertCode(Status.Code.ALREADY_EXISTS, () -> create(request("pvc-codes-clone", 0)));
        assertCode(Status.Code.NOT_FOUND, () -> create(request("pvc-from-nothing", 0)
                .setVolumeContentSource(fromSnapshot("nfs-snapshot/nfs.example/%2Fsrv%2Fshare/no-such-snapshot"))));
        assertCode(Status.Code.NOT_FOUND, () -> create(request("pvc-from-nothing", 0).setVolumeContentSource(fromSnapshot("no-such-snapshot"))));
        assertCode(Status.Code.NOT_FOUND, () -> create(request("pvc-from-nothing", 0).setVolumeContentSource(fromVolume("no-such-volume"))));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> create(request("pvc-from-elsewhere", 0)
                .setVolumeContentSource(fromSnapshot("nfs-snapshot/nfs.example/%2Fsrv%2Fother/snap-codes"))));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> create(request("pvc-from-local", 0)
                .setVolumeContentSource(fromVolume("local/node-a/pvc-local"))));
        Files.writeString(Files.createDirectories(exportData.resolve("somebodys-dir")).resolve("theirs"), "kept");
        assertCode(Status.Code.FAILED_PRECONDITION, () -> create(request("pvc-codes-over", 0)
                .putParameters("subDir", "somebodys-dir").setVolumeContentSource(fromSnapshot(snapshotId))));
        assertEquals(List.of("theirs"), FileTrees.list(exportData.resolve("somebodys-dir")), "a restore never copies into a directory it did not make");
        assertFalse(Files.exists(exportData.resolve("pvc-from-nothing")), "a refused request made nothing");

        delete(volumeId("pvc-codes-clone"));
        delete(source.getVolumeId());
        delete(other.getVolumeId());
        deleteSnapshot(snapshotId);
        deleteSnapshot("nfs-snapshot/nfs.example/%2Fsrv%2Fshare/never-taken");
        assertDriverAreaHoldsNoCopy();
    }

    @Test
    void snapshotsAndClonesAreAdvertised() {
        var advertised = cluster.controller().controllerGetCapabilities(ControllerGetCapabilitiesRequest.getDefaultInstance())
                .getCapabilitiesList().stream().map(c -> c.getRpc().getType()).toList();
        assertTrue(advertised.containsAll(List.of(ControllerServiceCapability.RPC.Type.CREATE_DELETE_SNAPSHOT,
                ControllerServiceCapability.RPC.Type.LIST_SNAPSHOTS, ControllerServiceCapability.RPC.Type.CLONE_VOLUME)), advertised.toString());
    }

    /**
     * A tree with what a volume holds: files of random bytes (empty, small, over a MiB), nested
     * directories, a relative and a dangling absolute link, a hard link, a setgid directory and a
     * setuid file of another owner, an old modification time.
     */
    static void writeTree(Path root, long seed) throws Exception {
        Random random = new Random(seed);
        Files.createDirectories(root.resolve("a/b/c"));
        Files.write(root.resolve("empty"), new byte[0]);
        Files.write(root.resolve("small"), bytes(random, 100));
        Files.write(root.resolve("a/big"), bytes(random, (int) MIB + 4097));
        Files.write(root.resolve("a/b/c/deep"), bytes(random, 70_000));
        Files.createSymbolicLink(root.resolve("relative-link"), Path.of("a/b/c/deep"));
        Files.createSymbolicLink(root.resolve("a/absolute-link"), Path.of("/etc/hostname"));
        Files.createLink(root.resolve("a/b/hard-link"), root.resolve("small"));
        Files.createDirectories(root.resolve("shared"));
        Programs.run("chown", "-R", "1234:5678", root.resolve("shared").toString(), root.resolve("a/big").toString());
        Programs.run("chmod", "2770", root.resolve("shared").toString());
        Programs.run("chmod", "4750", root.resolve("a/big").toString());
        Programs.run("chown", "-h", "1234:5678", root.resolve("relative-link").toString());
        Files.setLastModifiedTime(root.resolve("small"), FileTime.from(Instant.parse("2020-02-02T02:02:02Z")));
    }

    /** Content changed, a file removed, one added. */
    static void changeTree(Path root) throws Exception {
        Files.write(root.resolve("a/b/c/deep"), bytes(new Random(99), 70_000));
        Files.delete(root.resolve("empty"));
        Files.writeString(root.resolve("shared/new"), "written after the snapshot");
    }

    static byte[] bytes(Random random, int size) {
        byte[] bytes = new byte[size];
        random.nextBytes(bytes);
        return bytes;
    }

    /** Nothing of a snapshot, a restore or a removal is left in the export's driver directory. */
    static void assertDriverAreaHoldsNoCopy() throws Exception {
        Path area = exportData.resolve(".strata-csi");
        for (String part : List.of("snapshots", "restoring", "trash")) {
            assertEquals(List.of(), FileTrees.list(area.resolve(part)), part);
        }
    }

    static CreateVolumeRequest.Builder request(String name, long bytes) {
        var request = CreateVolumeRequest.newBuilder().setName(name).putParameters("server", SERVER).putParameters("share", SHARE)
                .addVolumeCapabilities(VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER)));
        if (bytes > 0) {
            request.getCapacityRangeBuilder().setRequiredBytes(bytes);
        }
        return request;
    }

    static Volume create(CreateVolumeRequest.Builder request) {
        return cluster.controller().createVolume(request.build()).getVolume();
    }

    static String volumeId(String name) {
        return "nfs/" + SERVER + "/%2Fsrv%2Fshare/" + name + "/delete";
    }

    static void delete(String volumeId) {
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volumeId).build());
    }

    static Snapshot snapshot(String name, String volumeId) {
        return cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder().setName(name).setSourceVolumeId(volumeId).build())
                .getSnapshot();
    }

    static void deleteSnapshot(String snapshotId) {
        cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshotId).build());
    }

    static VolumeContentSource fromSnapshot(String snapshotId) {
        return VolumeContentSource.newBuilder().setSnapshot(VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshotId)).build();
    }

    static VolumeContentSource fromVolume(String volumeId) {
        return VolumeContentSource.newBuilder().setVolume(VolumeContentSource.VolumeSource.newBuilder().setVolumeId(volumeId)).build();
    }

    static void assertCode(Status.Code code, org.junit.jupiter.api.function.Executable call) {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, call);
        assertEquals(code, e.getStatus().getCode(), e.getStatus().toString());
    }
}
