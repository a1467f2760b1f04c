package dev.strata.csi.controller.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * NfsController's logic without root: an export directory that the mount table describes as an
 * NFS mount (no quotas: {@link InMemoryProjectQuotas} must see no call), volumes, their records,
 * publications, deletes as onDelete says, and snapshots and restores through the controller's
 * API, with what each leaves in the export. The same on a real bind-mounted export, with crashes
 * and two replicas: NfsCrashRecoveryTest and NfsReplicasTest (root).
 */
class NfsControllerTest {

    static final long MIB = 1L << 20;

    @TempDir
    Path root;
    Path export;
    volatile boolean exportMounted = true;
    final InMemoryProjectQuotas quotas = new InMemoryProjectQuotas();
    NfsController controller;

    @BeforeEach
    void start() throws Exception {
        export = Files.createDirectories(root.resolve("nfs.example/srv/share"));
        Log log = new Log(new PrintStream(PrintStream.nullOutputStream()), 0);
        Exports exports = new Exports(root, false, null, new NfsExportMetrics(new PrometheusRegistry()), new Kernel(), log,
                () -> MountTable.parse("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n" + (exportMounted
                        ? "40 22 0:53 / " + export + " rw,relatime shared:30 - nfs4 nfs.example:/srv/share rw,vers=4.2\n" : "")));
        controller = new NfsController(exports, quotas, Duration.ofSeconds(30),
                Clock.fixed(Instant.parse("2026-01-02T03:04:05Z"), ZoneOffset.UTC), Crashes.none(), log);
    }

    Volume create(String name, Map<String, String> parameters, VolumeContentSource source) throws Exception {
        var request = CreateVolumeRequest.newBuilder().setName(name).putParameters("server", "nfs.example").putParameters("share", "/srv/share")
                .putAllParameters(parameters)
                .addVolumeCapabilities(VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER)));
        request.getCapacityRangeBuilder().setRequiredBytes(MIB);
        if (source.hasSnapshot() || source.hasVolume()) {
            request.setVolumeContentSource(source);
        }
        return controller.create(controller.check(request.build()));
    }

    Volume create(String name) throws Exception {
        return create(name, Map.of(), VolumeContentSource.getDefaultInstance());
    }

    NfsController.VolumeHandle handle(Volume volume) {
        return controller.byId(volume.getVolumeId()).orElseThrow();
    }

    @Test
    void aVolumeIsADirectoryWithARecordAndARepeatIsTheSameVolume() throws Exception {
        Volume volume = create("pvc-a");
        assertEquals(volume, create("pvc-a"));
        assertEquals("pvc-a", volume.getVolumeContextMap().get("subDir"));
        assertEquals("false", volume.getVolumeContextMap().get("capacityEnforced"), "an NFS mount has no project quotas");
        assertTrue(Files.isDirectory(export.resolve("pvc-a")));
        assertEquals(volume.getVolumeId(), new VolumeRecords(export.resolve(".strata-csi/volumes")).read("pvc-a").orElseThrow().getVolumeId());
        assertEquals(List.of(volume.getVolumeId()), controller.list().stream().map(e -> e.getVolume().getVolumeId()).toList());
        assertEquals(Status.Code.ALREADY_EXISTS, assertThrows(CsiException.class,
                () -> create("pvc-a", Map.of("onDelete", "retain"), VolumeContentSource.getDefaultInstance())).code());
        assertEquals(List.of(), quotas.calls);
        assertTrue(controller.availableBytes(GetCapacityRequest.newBuilder().putParameters("server", "nfs.example")
                .putParameters("share", "/srv/share").build()) > 0);
    }

    /** A directory that is not a mount point would be controller-server's own disk: nothing is written there. */
    @Test
    void anExportThatIsNotMountedIsNeverWritten() throws Exception {
        exportMounted = false;
        CsiException e = assertThrows(CsiException.class, () -> create("pvc-a"));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
        assertTrue(e.getMessage().contains("is not mounted"), e.getMessage());
        try (var left = Files.list(export)) {
            assertEquals(List.of(), left.toList());
        }
    }

    @Test
    void publishRecordsTheNodesAndUnpublishForgetsThem() throws Exception {
        Volume volume = create("pvc-a");
        VolumeCapability capability = VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance()).build();
        controller.publish(handle(volume), "node-1", capability);
        controller.publish(handle(volume), "node-2", capability);
        controller.publish(handle(volume), "node-1", capability);
        assertEquals(List.of("node-1", "node-2"), controller.list().getFirst().getStatus().getPublishedNodeIdsList());

        controller.unpublish(handle(volume), "node-1");
        controller.unpublish(handle(volume), "node-1");
        assertEquals(List.of("node-2"), controller.list().getFirst().getStatus().getPublishedNodeIdsList());

        NfsController.VolumeHandle gone = controller.byId(volume.getVolumeId().replace("pvc-a", "pvc-gone")).orElseThrow();
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class, () -> controller.publish(gone, "node-1", capability)).code());
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class, () -> controller.validate(gone, Map.of())).code());
    }

    @Test
    void deleteDoesWhatOnDeleteSays() throws Exception {
        Volume deleted = create("pvc-delete");
        Volume archived = create("pvc-archive", Map.of("onDelete", "archive"), VolumeContentSource.getDefaultInstance());
        Volume retained = create("pvc-retain", Map.of("onDelete", "retain"), VolumeContentSource.getDefaultInstance());
        for (Volume volume : List.of(deleted, archived, retained)) {
            Files.writeString(export.resolve(volume.getVolumeContextMap().get("subDir")).resolve("data"), "kept?");
            controller.delete(handle(volume));
            controller.delete(handle(volume));
        }
        assertFalse(Files.exists(export.resolve("pvc-delete")));
        assertEquals("kept?", Files.readString(export.resolve("archived-pvc-archive-20260102T030405Z/data")));
        assertEquals("kept?", Files.readString(export.resolve("pvc-retain/data")));
        assertEquals(List.of(), controller.list(), "every record is gone");
    }

    /**
     * A directory the controller did not make for the volume's name (retained after its volume was
     * deleted, as a subDir template that gives two tenants one path would hand it on, or made by
     * hand) is never taken over: the data stays, unexposed, and no record is written.
     */
    @Test
    void aNewVolumeNeverTakesOverADirectoryItDidNotMake() throws Exception {
        Volume first = create("pvc-tenant-a", Map.of("subDir", "shared", "onDelete", "retain"), VolumeContentSource.getDefaultInstance());
        Files.writeString(export.resolve("shared/data"), "tenant a's");
        controller.delete(handle(first));
        Files.createDirectories(export.resolve("by-hand"));
        for (String subDir : List.of("shared", "by-hand")) {
            CsiException refused = assertThrows(CsiException.class,
                    () -> create("pvc-tenant-b", Map.of("subDir", subDir), VolumeContentSource.getDefaultInstance()));
            assertEquals(Status.Code.FAILED_PRECONDITION, refused.code());
            assertTrue(refused.getMessage().contains("exists already and was not made for volume pvc-tenant-b"), refused.getMessage());
            assertTrue(new VolumeRecords(export.resolve(".strata-csi/volumes")).read(subDir).isEmpty(), "no record: " + subDir);
        }
        assertEquals("tenant a's", Files.readString(export.resolve("shared/data")), "the retained data is kept as it was");
        assertEquals(List.of(), controller.list());

        // Its own creation, retried after the directory was made, is the same volume.
        Volume made = create("pvc-tenant-b", Map.of("subDir", "new"), VolumeContentSource.getDefaultInstance());
        assertEquals(made, create("pvc-tenant-b", Map.of("subDir", "new"), VolumeContentSource.getDefaultInstance()));
    }

    /** A snapshot is a copy of the volume's files; a volume made from it holds them, and none is made from a deleted one. */
    @Test
    void aVolumeRestoredFromASnapshotHoldsItsFiles() throws Exception {
        Volume volume = create("pvc-a");
        Files.writeString(export.resolve("pvc-a/data"), "before");
        Snapshot snapshot = controller.createSnapshot(handle(volume), "snapshot-1", Map.of());
        assertEquals(snapshot, controller.createSnapshot(handle(volume), "snapshot-1", Map.of()));
        Files.writeString(export.resolve("pvc-a/data"), "after");
        assertEquals(List.of(snapshot.getSnapshotId()), controller.snapshots().stream().map(Snapshot::getSnapshotId).toList());

        VolumeContentSource source = VolumeContentSource.newBuilder()
                .setSnapshot(VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId())).build();
        Volume restored = create("pvc-restored", Map.of(), source);
        assertEquals("before", Files.readString(export.resolve("pvc-restored/data")));
        assertEquals(restored, create("pvc-restored", Map.of(), source));

        controller.deleteSnapshot(snapshot.getSnapshotId());
        controller.deleteSnapshot(snapshot.getSnapshotId());
        assertEquals(List.of(), controller.snapshots());
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class, () -> create("pvc-late", Map.of(), source)).code());
        assertFalse(Files.exists(export.resolve("pvc-late")));
        assertEquals("before", Files.readString(export.resolve("pvc-restored/data")), "the restored volume is its own copy");
    }
}
