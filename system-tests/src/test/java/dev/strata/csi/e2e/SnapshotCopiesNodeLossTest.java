package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Snapshots kept on two nodes (VolumeSnapshotClass parameter copies: "2", docs/snapshot-copies.md),
 * three node-servers as processes on image pools: the snapshot is ready only once its copy is
 * complete; its own node killed for good and its pool deleted, it is still listed once under its
 * id, and restores from the copy, on the node holding it and streamed to another, every byte as
 * it was; deleting it removes every copy, also one on a node that was down then (a tombstone
 * on a live node, outliving a controller restart, names it until it is back). Nothing is
 * left on any node: no image, record, loop device or mount.
 */
@Tag("root")
class SnapshotCopiesNodeLossTest {

    private static final Map<String, String> TWO_COPIES = Map.of("copies", "2");
    private static final Duration READY_WITHIN = Duration.ofSeconds(120);

    @TempDir
    Path dir;

    private Cluster cluster;

    @AfterEach
    void nothingLeftBehind() throws Exception {
        if (cluster != null) {
            cluster.close();
            for (String node : List.of("node-a", "node-b", "node-c")) {
                Path pool = dir.resolve("cluster/" + node + "/pool");
                if (Files.isDirectory(pool)) {
                    try (Stream<Path> files = Files.walk(pool)) {
                        assertEquals(List.of(), files.map(Path::toString)
                                .filter(file -> file.endsWith(".img") || file.endsWith(".record") || file.endsWith(".tombstone")).toList(),
                                "no image, record or tombstone is left in the pool of " + node);
                    }
                }
            }
        }
        PipelineTest.cluster = null;
        SnapshotTest.cluster = null;
        assertEquals(List.of(), SystemState.cleanUp(dir), "the test left mounts or loop devices behind");
    }

    private void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir.resolve("cluster"), "node-a", "node-b", "node-c");
        PipelineTest.cluster = cluster;
        SnapshotTest.cluster = cluster;
    }

    /**
     * A block and an xfs volume on node-a, written, snapshotted with two copies while in use,
     * written again and deleted; node-a's node-server killed for good and its pool directory
     * deleted. Each snapshot is listed once under its id and size; it restores on node-b, which
     * holds the copy, and onto node-c, streamed from node-b: both hold the content at snapshot
     * time, byte for byte. Both kinds share one cluster, so node-a is lost once and its removal
     * from node-b's tombstones is waited for once.
     */
    @Test
    void snapshotsWithTwoCopiesRestoreAfterTheirNodeIsLost() throws Exception {
        start();
        List<Kind> kinds = List.of(new Kind("block", PipelineTest.block()), new Kind("xfs", PipelineTest.mount("xfs")));
        for (Kind kind : kinds) {
            kind.take();
        }
        String controllerLog = cluster.controllerProcess().output();
        assertTrue(controllerLog.contains("to=node-b"), "the first node by id with room keeps the copy:\n" + controllerLog);
        for (Kind kind : kinds) {
            assertTrue(controllerLog.contains("snapshot copy complete\" snapshot=" + kind.snapshot() + " "), controllerLog);
            assertEquals(1, count(controllerLog, "snapshot copy started\" snapshot=" + kind.snapshot() + " "),
                    "one transfer, whatever the retries:\n" + controllerLog);
            SnapshotTest.delete(kind.mounted); // deleting the source volume keeps the snapshot and its copy
        }

        cluster.node("node-a").process().close();
        SystemState.run("rm", "-rf", cluster.node("node-a").pool().toString());
        awaitExpired("node-a");

        List<Snapshot> listed = SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder());
        assertEquals(kinds.stream().map(kind -> kind.ready.getSnapshotId()).sorted().toList(),
                listed.stream().map(Snapshot::getSnapshotId).toList(), "each listed once, by its id");
        for (Kind kind : kinds) {
            kind.restore();
        }

        // node-a stays down: node-b keeps a tombstone naming it until the controller counts node-a as removed.
        for (Kind kind : kinds) {
            cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(kind.ready.getSnapshotId()).build());
        }
        assertEquals(List.of(), SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder()));
        assertEquals(kinds.stream().map(kind -> kind.snapshot() + ".tombstone").sorted().toList(), tombstones(cluster, "node-b"),
                "the deletions recorded on node-b");
        awaitNoTombstones(cluster, "node-b", Duration.ofSeconds(150)); // 30 renewals of 2 s, and a reconcile pass of 30 s
    }

    /** One kind of volume through the node-loss test: its source on node-a, its snapshot, its restores. */
    private final class Kind {
        private final String name;
        private final VolumeCapability capability;
        private SnapshotTest.Published mounted;
        private String then;
        private Snapshot ready;

        Kind(String name, VolumeCapability capability) {
            this.name = name;
            this.capability = capability;
        }

        String snapshot() {
            return "snap-" + name;
        }

        private boolean block() {
            return name.equals("block");
        }

        /** The source written, snapshotted with two copies, written again while the copy is made; ready. */
        void take() throws Exception {
            Volume source = SnapshotTest.create("pvc-" + name, 320 * MIB, capability, "node-a", null);
            mounted = SnapshotTest.publish("node-a", source, capability);
            then = block() ? writeDevice(mounted.target(), 1) : VolumeData.write(mounted.target().resolve("data"), 6 * MIB);
            CreateSnapshotRequest take = CreateSnapshotRequest.newBuilder().setName(snapshot())
                    .setSourceVolumeId(source.getVolumeId()).putAllParameters(TWO_COPIES).build();
            Snapshot first = cluster.controller().createSnapshot(take).getSnapshot();
            assertEquals("local-snapshot/node-a/" + snapshot(), first.getSnapshotId());
            assertFalse(first.getReadyToUse(), "not ready while its copy is being made");
            if (block()) {
                writeDevice(mounted.target(), 2); // the pod writes on during the copy: the copy holds the cut
            } else {
                VolumeData.write(mounted.target().resolve("data"), 5 * MIB);
            }
            ready = untilReady(take);
            assertEquals(first.getSizeBytes(), ready.getSizeBytes());
        }

        /** Restored on node-b from its copy, and onto node-c streamed from node-b's: the content at snapshot time. */
        void restore() throws Exception {
            Snapshot byId = SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder().setSnapshotId(ready.getSnapshotId())).getFirst();
            assertEquals(ready.getSizeBytes(), byId.getSizeBytes());
            assertTrue(byId.getReadyToUse());
            for (String node : List.of("node-b", "node-c")) {
                String volume = "pvc-" + name + "-on-" + node.substring(node.length() - 1);
                Volume restored = retried(() -> SnapshotTest.create(volume, 0, capability, node, SnapshotTest.from(ready)));
                assertEquals("local/" + node + "/" + volume, restored.getVolumeId());
                var published = SnapshotTest.publish(node, restored, capability);
                assertEquals(then, block() ? readDevice(published.target()) : VolumeData.read(published.target().resolve("data")),
                        name + " restored on " + node + ": the content at snapshot time");
                SnapshotTest.delete(published);
            }
        }
    }

    /**
     * node-b, which holds the copy, is down when the snapshot is deleted: the call succeeds, node-a
     * keeps a tombstone naming node-b, which outlives a controller restart; node-b back, its copy
     * is deleted as it registers, and the tombstone with it. The snapshot is not listed meanwhile.
     */
    @Test
    void aCopyOnANodeDownAtDeletionIsDeletedWhenItIsBack() throws Exception {
        start();
        VolumeCapability block = PipelineTest.block();
        Volume source = SnapshotTest.create("pvc-source", 64 * MIB, block, "node-a", null);
        TransferCrashTest.write(cluster.node("node-a").pool().resolve("pvc-source.img"), 0, 8 * MIB, 4);
        CreateSnapshotRequest take = CreateSnapshotRequest.newBuilder().setName("snap-deleted")
                .setSourceVolumeId(source.getVolumeId()).putAllParameters(TWO_COPIES).build();
        Snapshot snapshot = untilReady(take);
        assertFalse(poolFiles("node-b").isEmpty(), "node-b holds the copy");
        cluster.node("node-b").process().close();
        awaitExpired("node-b");
        cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
        assertEquals(List.of(), SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder()), "deleted, though a copy is on node-b");
        assertEquals(List.of("snap-deleted.tombstone"), tombstones(cluster, "node-a"));
        assertFalse(poolFiles("node-b").isEmpty(), "nothing deleted on node-b while it is down");

        cluster.killController(0);
        cluster.startController(0);
        cluster.startNode("node-b"); // registered with the restarted controller, as node-a and node-c are at their next renewal
        awaitNoTombstones(cluster, "node-a", Duration.ofSeconds(20));
        assertEquals(List.of(), poolFiles("node-b"), "node-b's copy deleted when it came back");
        assertTrue(cluster.controllerProcess().output().contains("deleted snapshot's copy removed from a node back from down"),
                cluster.controllerProcess().output());
        SnapshotTest.deleteVolume(source);
    }

    /** The images and records in a node's pool. */
    private List<String> poolFiles(String node) throws Exception {
        try (Stream<Path> files = Files.walk(dir.resolve("cluster/" + node + "/pool"))) {
            return files.map(Path::toString).filter(file -> file.endsWith(".img") || file.endsWith(".record")).toList();
        }
    }

    /** The tombstones in a node's pool. */
    static List<String> tombstones(Cluster cluster, String node) throws Exception {
        Path tombstones = cluster.node(node).pool().resolve("tombstones");
        if (!Files.isDirectory(tombstones)) {
            return List.of();
        }
        try (Stream<Path> files = Files.list(tombstones)) {
            return files.map(file -> file.getFileName().toString()).filter(file -> file.endsWith(".tombstone")).sorted().toList();
        }
    }

    static void awaitNoTombstones(Cluster cluster, String node, Duration limit) throws Exception {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!tombstones(cluster, node).isEmpty()) {
            assertTrue(System.nanoTime() < deadline, "the tombstone on " + node + " is removed within " + limit + ":\n" + cluster.logs());
            Thread.sleep(500);
        }
    }

    /**
     * A later snapshot of the same volume goes to the node holding the earlier one's copy, built on
     * it: only what changed is sent (1 MiB rewritten of 16), and it restores there byte for byte.
     */
    @Test
    void aLaterSnapshotIsCopiedOnTheEarlierOne() throws Exception {
        start();
        Volume source = SnapshotTest.create("pvc-source", 64 * MIB, PipelineTest.block(), "node-a", null);
        Path image = cluster.node("node-a").pool().resolve("pvc-source.img");
        TransferCrashTest.write(image, 0, 16 * MIB, 5);
        Snapshot first = untilReady(CreateSnapshotRequest.newBuilder().setName("snap-first")
                .setSourceVolumeId(source.getVolumeId()).putAllParameters(TWO_COPIES).build());
        TransferCrashTest.write(image, 4 * MIB, MIB, 6);
        String then = ContentTransferTest.sha256(image);
        Snapshot second = untilReady(CreateSnapshotRequest.newBuilder().setName("snap-second")
                .setSourceVolumeId(source.getVolumeId()).putAllParameters(TWO_COPIES).build());
        String log = cluster.controllerProcess().output();
        var complete = java.util.regex.Pattern.compile("snapshot copy complete\" snapshot=snap-second origin=node-a from=node-a to=(\\S+)"
                + " base_snapshot=(\\S+) resumed_at=0 data_bytes=(\\d+)").matcher(log);
        assertTrue(complete.find(), log);
        assertEquals("node-b", complete.group(1), "the node holding the earlier copy keeps the later one");
        assertEquals("snap-first", complete.group(2));
        long sent = Long.parseLong(complete.group(3));
        assertTrue(sent <= MIB * 11 / 10, "only what changed is sent: " + sent + " bytes for 1 MiB rewritten");

        Volume onB = retried(() -> SnapshotTest.create("pvc-on-b", 0, PipelineTest.block(), "node-b", SnapshotTest.from(second)));
        assertEquals("local/node-b/pvc-on-b", onB.getVolumeId());
        assertEquals(then, ContentTransferTest.sha256(cluster.node("node-b").pool().resolve("pvc-on-b.img")),
                "restored on node-b from the copy built on the earlier one: byte for byte");
        SnapshotTest.deleteVolume(onB);
        for (Snapshot snapshot : List.of(first, second)) {
            cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
        }
        SnapshotTest.deleteVolume(source);
    }

    /** INVALID_ARGUMENT for a value that is no number, below 1, or above the nodes there are. */
    @Test
    void copiesBeyondTheNodesAreRefused() throws Exception {
        start();
        Volume source = SnapshotTest.create("pvc-source", 16 * MIB, PipelineTest.block(), "node-a", null);
        for (String copies : List.of("4", "0", "two")) {
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> cluster.controller().createSnapshot(
                    CreateSnapshotRequest.newBuilder().setName("snap-refused").setSourceVolumeId(source.getVolumeId())
                            .putParameters("copies", copies).build()));
            assertEquals(Status.Code.INVALID_ARGUMENT, refused.getStatus().getCode(), copies);
            assertTrue(refused.getStatus().getDescription().contains("copies"), refused.getStatus().toString());
        }
        assertEquals(List.of(), SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder()));
        SnapshotTest.deleteVolume(source);
    }

    private Snapshot untilReady(CreateSnapshotRequest take) throws InterruptedException {
        return untilReady(cluster, take, READY_WITHIN);
    }

    /** CreateSnapshot asked again as external-snapshotter asks it while the snapshot is not ready. */
    static Snapshot untilReady(Cluster cluster, CreateSnapshotRequest take, Duration within) throws InterruptedException {
        long deadline = System.nanoTime() + within.toNanos();
        while (true) {
            Snapshot snapshot = retried(cluster, () -> cluster.controller().createSnapshot(take).getSnapshot(), within);
            if (snapshot.getReadyToUse()) {
                return snapshot;
            }
            assertTrue(System.nanoTime() < deadline, "ready within " + within + ":\n" + cluster.logs());
            Thread.sleep(500);
        }
    }

    /** Until the controller no longer counts the node's agent as live (three missed renewals). */
    static void awaitExpired(String nodeId) throws InterruptedException {
        Thread.sleep(Duration.ofSeconds(8)); // 3 renewals of 2 s, and a margin
    }

    private <T> T retried(java.util.function.Supplier<T> call) throws InterruptedException {
        return retried(cluster, call, Duration.ofSeconds(120));
    }

    /** The call retried as a sidecar retries it, for at most {@code limit}; the cluster's logs with the last error. */
    static <T> T retried(Cluster cluster, java.util.function.Supplier<T> call, Duration limit) throws InterruptedException {
        try {
            return SidecarRetry.untilDone(limit, call);
        } catch (StatusRuntimeException e) {
            throw new AssertionError(e.getStatus() + "\n" + cluster.logs(), e);
        }
    }

    /** Random data at a few offsets of the device, synced; the SHA-256 of the whole device then. */
    private static String writeDevice(Path device, int seed) throws Exception {
        byte[] data = new byte[(int) (3 * MIB)];
        new Random(seed).nextBytes(data);
        try (RandomAccessFile file = new RandomAccessFile(device.toFile(), "rw")) {
            file.seek(seed * 7 * MIB + 512);
            file.write(data);
            file.seek(200 * MIB + seed * 4096);
            file.write(data, 0, 4096);
            file.getFD().sync();
        }
        return readDevice(device);
    }

    static String readDevice(Path device) throws Exception {
        MessageDigest digest = MessageDigest.getInstance("SHA-256");
        byte[] buffer = new byte[1 << 20];
        try (var in = Files.newInputStream(device)) {
            for (int read = in.read(buffer); read >= 0; read = in.read(buffer)) {
                digest.update(buffer, 0, read);
            }
        }
        return HexFormat.of().formatHex(digest.digest());
    }

    private static int count(String text, String part) {
        int count = 0;
        for (int at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + 1)) {
            count++;
        }
        return count;
    }
}
