package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static dev.strata.csi.e2e.VolumeData.read;
import static dev.strata.csi.e2e.VolumeData.sha256;
import static dev.strata.csi.e2e.VolumeData.write;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.ListSnapshotsResponse;
import csi.v1.Csi.NodeGetVolumeStatsRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import csi.v1.Csi.VolumeUsage;
import dev.strata.csi.testing.LoopFilesystem;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Snapshots, restore and clone on one node, as csi-snapshotter and external-provisioner drive them,
 * with real loop devices and filesystems. node-a's pool is an xfs filesystem of its own (reflinks,
 * and capacity that no other process changes); node-b's is on the machine's ext4 (sparse copies).
 */
@Tag("root")
class SnapshotTest {

    static final String REFLINK_NODE = "node-a";
    static final String COPY_NODE = "node-b";

    @TempDir
    static Path dir;

    static Cluster cluster;
    static Relays relays;
    static LoopFilesystem xfsPool;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        xfsPool = LoopFilesystem.mount(dir.resolve("xfs-pool.img"), 3L << 30, dir.resolve(REFLINK_NODE + "/pool"), "-m", "reflink=1");
        cluster = Cluster.start(dir, REFLINK_NODE, COPY_NODE);
        relays = new Relays(cluster);
        PipelineTest.cluster = cluster;
    }

    @AfterAll
    static void stop() throws Exception {
        PipelineTest.cluster = null;
        if (cluster != null) {
            cluster.close();
        }
        if (xfsPool != null) {
            xfsPool.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir));
    }

    @AfterEach
    void everythingDeletedLeavesThePoolsEmpty() throws Exception {
        for (String node : List.of(REFLINK_NODE, COPY_NODE)) {
            try (Stream<Path> files = Files.walk(cluster.node(node).pool())) {
                List<Path> left = files.filter(file -> file.toString().endsWith(".img") || file.toString().endsWith(".record")
                        || file.toString().endsWith(".frozen")).toList();
                assertEquals(List.of(), left, "every volume and snapshot was deleted");
            }
        }
    }

    /** A volume through its phases on {@code node}, and its paths. */
    record Published(String node, Volume volume, VolumeCapability capability, Path staging, Path target) {}

    static Volume create(String name, long bytes, VolumeCapability capability, String node, VolumeContentSource source) {
        return create(name, bytes, capability, node, source, Map.of());
    }

    /** As {@link #create(String, long, VolumeCapability, String, VolumeContentSource)}, with a StorageClass's parameters. */
    static Volume create(String name, long bytes, VolumeCapability capability, String node, VolumeContentSource source,
            Map<String, String> parameters) {
        CreateVolumeRequest.Builder request = CreateVolumeRequest.newBuilder()
                .setName(name)
                .addVolumeCapabilities(capability)
                .putAllParameters(parameters)
                .setAccessibilityRequirements(TopologyRequirement.newBuilder()
                        .addPreferred(PipelineTest.on(node)).addRequisite(PipelineTest.on(node)));
        if (bytes > 0) {
            request.setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(bytes));
        }
        if (source != null) {
            request.setVolumeContentSource(source);
        }
        return cluster.controller().createVolume(request.build()).getVolume();
    }

    static Published publish(String node, Volume volume, VolumeCapability capability) throws Exception {
        cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId(node).setVolumeCapability(capability).build());
        String name = volume.getVolumeId().substring(volume.getVolumeId().lastIndexOf('/') + 1);
        Path staging = cluster.stagingPath(node, name);
        Path target = cluster.kubeletDir(node, "pods/" + name + "/volumes").resolve(capability.hasBlock() ? "block" : "mount");
        var client = cluster.node(node).node();
        client.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build());
        client.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability).build());
        return new Published(node, volume, capability, staging, target);
    }

    static void unpublish(Published p) {
        var client = cluster.node(p.node()).node();
        client.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(p.volume().getVolumeId())
                .setTargetPath(p.target().toString()).build());
        client.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(p.volume().getVolumeId())
                .setStagingTargetPath(p.staging().toString()).build());
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(p.volume().getVolumeId()).setNodeId(p.node()).build());
    }

    static void delete(Published p) {
        unpublish(p);
        deleteVolume(p.volume());
    }

    static void deleteVolume(Volume volume) {
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
    }

    static Snapshot snapshot(String name, Volume source) {
        return cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder()
                .setName(name).setSourceVolumeId(source.getVolumeId()).build()).getSnapshot();
    }

    static void deleteSnapshot(Snapshot snapshot) {
        cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
    }

    static VolumeContentSource from(Snapshot snapshot) {
        return VolumeContentSource.newBuilder().setSnapshot(VolumeContentSource.SnapshotSource.newBuilder()
                .setSnapshotId(snapshot.getSnapshotId())).build();
    }

    static VolumeContentSource from(Volume volume) {
        return VolumeContentSource.newBuilder().setVolume(VolumeContentSource.VolumeSource.newBuilder()
                .setVolumeId(volume.getVolumeId())).build();
    }

    /** Writes to a mounted volume, failing instead of hanging should its filesystem have been left frozen. */
    static void writeNotFrozen(Path file) throws Exception {
        CompletableFuture.runAsync(() -> {
            try {
                Files.writeString(file, "written after the snapshot");
                try (RandomAccessFile sync = new RandomAccessFile(file.toFile(), "rw")) {
                    sync.getFD().sync();
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }).get(20, TimeUnit.SECONDS);
    }

    static long statsTotal(Published p) {
        return cluster.node(p.node()).node().nodeGetVolumeStats(NodeGetVolumeStatsRequest.newBuilder()
                .setVolumeId(p.volume().getVolumeId()).setVolumePath(p.target().toString()).build())
                .getUsageList().stream().filter(usage -> usage.getUnit() == VolumeUsage.Unit.BYTES).findFirst().orElseThrow().getTotal();
    }

    /**
     * ext4 written, snapshotted while mounted, changed: the restore holds the content at snapshot
     * time and a clean filesystem (no journal replay needed: it was frozen for the copy), the
     * clone the current content; the snapshot outlives its source and still restores.
     */
    @ParameterizedTest
    @ValueSource(strings = {REFLINK_NODE, COPY_NODE})
    void aMountedVolumeSnapshotRestoresItsContentAtSnapshotTime(String node) throws Exception {
        VolumeCapability ext4 = PipelineTest.mount("ext4");
        Published source = publish(node, create("pvc-src-" + node, 64 * MIB, ext4, node, null), ext4);
        String before = write(source.target().resolve("data"), 8 * MIB);

        Snapshot snapshot = snapshot("snap-" + node, source.volume());
        assertEquals("local-snapshot/" + node + "/snap-" + node, snapshot.getSnapshotId());
        assertEquals(source.volume().getVolumeId(), snapshot.getSourceVolumeId());
        assertEquals(64 * MIB, snapshot.getSizeBytes());
        assertTrue(snapshot.getReadyToUse());
        assertTrue(snapshot.getCreationTime().getSeconds() > 0);
        assertEquals(snapshot, snapshot("snap-" + node, source.volume()), "the same name and source: the same snapshot");
        writeNotFrozen(source.target().resolve("after"));
        Path snapshotFile = cluster.node(node).pool().resolve("snapshots/snap-" + node + ".img");
        assertEquals(node.equals(REFLINK_NODE), Programs.run("filefrag", "-v", snapshotFile.toString()).contains("shared"),
                "a reflink on xfs, a copy on ext4");

        String changed = write(source.target().resolve("data"), 8 * MIB + 4096);
        assertFalse(changed.equals(before));

        Volume restored = create("pvc-restored-" + node, 64 * MIB, ext4, node, from(snapshot));
        assertEquals("local/" + node + "/pvc-restored-" + node, restored.getVolumeId());
        assertEquals(from(snapshot), restored.getContentSource());
        Path restoredImage = cluster.node(node).pool().resolve("pvc-restored-" + node + ".img");
        String header = Programs.run("dumpe2fs", "-h", restoredImage.toString());
        String features = header.lines().filter(line -> line.startsWith("Filesystem features:")).findFirst().orElseThrow();
        assertFalse(features.contains("needs_recovery"), "the copy needs no journal replay: " + features);
        var fsck = Programs.execute("e2fsck", "-fn", restoredImage.toString());
        assertEquals(0, fsck.status(), "e2fsck finds the restored filesystem clean:\n" + fsck.output());

        Published restore = publish(node, restored, ext4);
        assertEquals(before, read(restore.target().resolve("data")), "the content at snapshot time");
        assertFalse(Files.exists(restore.target().resolve("after")));

        Volume clone = create("pvc-clone-" + node, 64 * MIB, ext4, node, from(source.volume()));
        assertEquals(from(source.volume()), clone.getContentSource());
        Published cloned = publish(node, clone, ext4);
        assertEquals(changed, read(cloned.target().resolve("data")), "a clone holds the source's current content");
        assertTrue(Files.exists(cloned.target().resolve("after")));
        writeNotFrozen(source.target().resolve("after-clone"));

        delete(source);
        assertEquals(List.of(snapshot), listSnapshots(ListSnapshotsRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId())),
                "the snapshot outlives its source volume");
        Published again = publish(node, create("pvc-again-" + node, 64 * MIB, ext4, node, from(snapshot)), ext4);
        assertEquals(before, read(again.target().resolve("data")));

        for (Published p : List.of(restore, cloned, again)) {
            delete(p);
        }
        deleteSnapshot(snapshot);
        deleteSnapshot(snapshot); // gone already: OK
        assertEquals(List.of(), listSnapshots(ListSnapshotsRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId())));
    }

    @ParameterizedTest
    @ValueSource(strings = {REFLINK_NODE, COPY_NODE})
    void aBlockVolumeRestoresByteForByte(String node) throws Exception {
        VolumeCapability block = PipelineTest.block();
        Published source = publish(node, create("pvc-blk-" + node, 16 * MIB, block, node, null), block);
        byte[] data = new byte[(int) (16 * MIB)];
        new Random(7).nextBytes(data);
        for (int hole = 0; hole < data.length; hole += (int) (2 * MIB)) {
            Arrays.fill(data, hole, hole + (int) MIB, (byte) 0); // every other MiB left zero
        }
        try (RandomAccessFile device = new RandomAccessFile(source.target().toFile(), "rw")) {
            device.write(data);
            device.getFD().sync();
        }
        Snapshot snapshot = snapshot("snap-blk-" + node, source.volume());
        try (RandomAccessFile device = new RandomAccessFile(source.target().toFile(), "rw")) {
            device.write(new byte[4096]);
            device.getFD().sync();
        }
        Volume restored = create("pvc-blk-restored-" + node, 16 * MIB, block, node, from(snapshot));
        assertEquals(sha256(data), sha256(Files.readAllBytes(cluster.node(node).pool().resolve("pvc-blk-restored-" + node + ".img"))));
        Published restore = publish(node, restored, block);
        byte[] read = new byte[data.length];
        try (RandomAccessFile device = new RandomAccessFile(restore.target().toFile(), "r")) {
            device.readFully(read);
        }
        assertEquals(sha256(data), sha256(read), "the restored device reads byte for byte what the snapshot held");
        delete(restore);
        delete(source);
        deleteSnapshot(snapshot);
    }

    /** Restored into a larger volume: the filesystem grows at its first stage, to the size asked for. */
    @ParameterizedTest
    @ValueSource(strings = {"xfs", "btrfs", "ext4"})
    void aRestoreLargerThanItsSnapshotComesUpAtTheNewSize(String fsType) throws Exception {
        VolumeCapability capability = PipelineTest.mount(fsType);
        Published source = publish(COPY_NODE, create("pvc-grow-" + fsType, 320 * MIB, capability, COPY_NODE, null), capability);
        String sum = write(source.target().resolve("data"), 4 * MIB);
        long smaller = statsTotal(source);
        Snapshot snapshot = snapshot("snap-grow-" + fsType, source.volume());
        delete(source);

        StatusRuntimeException tooSmall = assertThrows(StatusRuntimeException.class,
                () -> create("pvc-grown-" + fsType, 300 * MIB, capability, COPY_NODE, from(snapshot)));
        assertEquals(Status.Code.OUT_OF_RANGE, tooSmall.getStatus().getCode(), tooSmall.getStatus().toString());

        Volume grown = create("pvc-grown-" + fsType, 448 * MIB, capability, COPY_NODE, from(snapshot));
        assertEquals(448 * MIB, grown.getCapacityBytes());
        if (fsType.equals("ext4") && !SystemState.hasCapSysResource()) {
            // This sandbox withholds CAP_SYS_RESOURCE, which ext4's online resize needs (node-server's
            // privileged container has it): the stage says why, and the data is intact.
            cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                    .setVolumeId(grown.getVolumeId()).setNodeId(COPY_NODE).setVolumeCapability(capability).build());
            Path staging = cluster.stagingPath(COPY_NODE, "pvc-grown-ext4");
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> cluster.node(COPY_NODE).node()
                    .nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(grown.getVolumeId())
                            .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build()));
            assertTrue(refused.getStatus().getDescription().contains("resize2fs"), refused.getStatus().toString());
            assertEquals(sum, read(staging.resolve("data")));
            cluster.node(COPY_NODE).node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(grown.getVolumeId())
                    .setStagingTargetPath(staging.toString()).build());
            cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(grown.getVolumeId()).setNodeId(COPY_NODE).build());
            deleteVolume(grown);
        } else {
            Published p = publish(COPY_NODE, grown, capability);
            long larger = statsTotal(p);
            assertTrue(larger > smaller + 128 * MIB * 8 / 10, smaller + " -> " + larger);
            assertEquals(sum, read(p.target().resolve("data")));
            unpublish(p);
            p = publish(COPY_NODE, grown, capability); // staged again: grown once, nothing more to do
            assertEquals(larger, statsTotal(p));
            delete(p);
        }
        deleteSnapshot(snapshot);
    }

    /** A clone mounted beside its source on one node, though both filesystems have one UUID; each is written on its own. */
    @ParameterizedTest
    @ValueSource(strings = {"xfs", "btrfs", "ext4"})
    void aCloneIsMountedBesideItsMountedSource(String fsType) throws Exception {
        VolumeCapability capability = PipelineTest.mount(fsType);
        Published source = publish(COPY_NODE, create("pvc-twin-" + fsType, 320 * MIB, capability, COPY_NODE, null), capability);
        String sum = write(source.target().resolve("data"), 4 * MIB);
        Published clone = publish(COPY_NODE, create("pvc-twin-clone-" + fsType, 320 * MIB, capability, COPY_NODE,
                from(source.volume())), capability);
        assertEquals(sum, read(clone.target().resolve("data")));
        String changed = write(clone.target().resolve("data"), 4 * MIB + 512);
        assertEquals(sum, read(source.target().resolve("data")), "the source keeps its own content");
        assertEquals(changed, read(clone.target().resolve("data")));
        delete(clone);
        delete(source);
    }

    @Test
    void snapshotsAreListedByIdBySourceAndInPages() throws Exception {
        VolumeCapability block = PipelineTest.block();
        Volume one = create("pvc-list-1", 4 * MIB, block, COPY_NODE, null);
        Volume two = create("pvc-list-2", 4 * MIB, block, REFLINK_NODE, null);
        Snapshot a = snapshot("snap-list-a", one);
        Snapshot b = snapshot("snap-list-b", one);
        Snapshot c = snapshot("snap-list-c", two);
        List<Snapshot> taken = List.of(c, a, b); // in id order: node-a's first

        assertEquals(taken, listSnapshots(ListSnapshotsRequest.newBuilder()));
        assertEquals(List.of(c), listSnapshots(ListSnapshotsRequest.newBuilder().setSnapshotId(c.getSnapshotId())));
        assertEquals(List.of(a, b), listSnapshots(ListSnapshotsRequest.newBuilder().setSourceVolumeId(one.getVolumeId())));
        assertEquals(List.of(), listSnapshots(ListSnapshotsRequest.newBuilder().setSnapshotId("local-snapshot/node-a/none")));

        List<Snapshot> paged = new ArrayList<>();
        String token = "";
        int pages = 0;
        do {
            ListSnapshotsResponse page = cluster.controller().listSnapshots(ListSnapshotsRequest.newBuilder()
                    .setMaxEntries(2).setStartingToken(token).build());
            assertTrue(page.getEntriesCount() <= 2);
            page.getEntriesList().forEach(entry -> paged.add(entry.getSnapshot()));
            token = page.getNextToken();
            pages++;
        } while (!token.isEmpty());
        assertEquals(2, pages);
        assertEquals(taken, paged);

        StatusRuntimeException otherSource = assertThrows(StatusRuntimeException.class, () -> snapshot("snap-list-a", two));
        assertEquals(Status.Code.ALREADY_EXISTS, otherSource.getStatus().getCode(), "the name is another volume's snapshot on another node");
        StatusRuntimeException sameNode = assertThrows(StatusRuntimeException.class,
                () -> snapshot("snap-list-a", create("pvc-list-3", 4 * MIB, block, COPY_NODE, null)));
        assertEquals(Status.Code.ALREADY_EXISTS, sameNode.getStatus().getCode());

        StatusRuntimeException unknown = assertThrows(StatusRuntimeException.class, () -> create("pvc-list-4", 4 * MIB, block, COPY_NODE,
                from(Snapshot.newBuilder().setSnapshotId("local-snapshot/" + COPY_NODE + "/never-taken").build())));
        assertEquals(Status.Code.NOT_FOUND, unknown.getStatus().getCode());
        StatusRuntimeException unknownVolume = assertThrows(StatusRuntimeException.class, () -> create("pvc-list-4", 4 * MIB, block,
                COPY_NODE, from(Volume.newBuilder().setVolumeId("local/" + COPY_NODE + "/pvc-never").build())));
        assertEquals(Status.Code.NOT_FOUND, unknownVolume.getStatus().getCode());

        for (Snapshot snapshot : taken) {
            deleteSnapshot(snapshot);
        }
        for (String name : List.of("pvc-list-1", "pvc-list-3")) {
            deleteVolume(Volume.newBuilder().setVolumeId("local/" + COPY_NODE + "/" + name).build());
        }
        deleteVolume(two);
        assertEquals(List.of(), listSnapshots(ListSnapshotsRequest.newBuilder()));
    }

    /** A restore without topology goes to the snapshot's node (CrossNodeTest restores onto another node). */
    @Test
    void aRestoreWithoutTopologyGoesToTheSnapshotsNode() throws Exception {
        Volume source = create("pvc-elsewhere", 4 * MIB, PipelineTest.block(), COPY_NODE, null);
        Snapshot snapshot = snapshot("snap-elsewhere", source);
        // Without topology it goes to the snapshot's node, as large as the snapshot when no size is asked.
        Volume restored = cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName("pvc-elsewhere-restored")
                .addVolumeCapabilities(PipelineTest.block()).setVolumeContentSource(from(snapshot)).build()).getVolume();
        assertEquals("local/" + COPY_NODE + "/pvc-elsewhere-restored", restored.getVolumeId());
        assertEquals(4 * MIB, restored.getCapacityBytes());
        deleteVolume(restored);
        deleteSnapshot(snapshot);
        deleteVolume(source);
    }

    /** Snapshots take the pool's capacity: a reflink's shared blocks, which its source's writes would need again. */
    @Test
    void getCapacityCountsSnapshots() throws Exception {
        VolumeCapability block = PipelineTest.block();
        Published source = publish(REFLINK_NODE, create("pvc-capacity", 64 * MIB, block, REFLINK_NODE, null), block);
        try (RandomAccessFile device = new RandomAccessFile(source.target().toFile(), "rw")) {
            byte[] data = new byte[(int) (48 * MIB)];
            new Random(3).nextBytes(data);
            device.write(data);
            device.getFD().sync();
        }
        try {
            long before = reportedCapacity(REFLINK_NODE);
            Snapshot snapshot = snapshot("snap-capacity", source.volume());
            long after = reportedCapacity(REFLINK_NODE);
            assertTrue(before - after >= 40 * MIB, "a snapshot of 48 MiB of data takes it from the pool: " + before + " -> " + after);
            deleteSnapshot(snapshot);
            // Compared with the reduced figure: xfs's own metadata and copy-on-write reservations move by a few MiB.
            long freed = reportedCapacity(REFLINK_NODE);
            assertTrue(freed >= after + 40 * MIB, "given back once deleted: " + after + " -> " + freed);
        } finally {
            delete(source);
        }
    }

    /**
     * GetCapacity of {@code node} once it answers what the node's agent reports now. The controller
     * learns the pool at the agent's next renewal: a figure read before that is from before the
     * last change (in this class's first test, from before its volume was created).
     */
    private static long reportedCapacity(String node) throws InterruptedException {
        long pool = relays.poolAvailable(node);
        return cluster.capacity(node, available -> Math.abs(available - pool) < MIB);
    }

    static List<Snapshot> listSnapshots(ListSnapshotsRequest.Builder request) {
        return cluster.controller().listSnapshots(request.build()).getEntriesList().stream()
                .map(ListSnapshotsResponse.Entry::getSnapshot).toList();
    }
}
