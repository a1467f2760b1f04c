package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static dev.strata.csi.e2e.SnapshotTest.create;
import static dev.strata.csi.e2e.SnapshotTest.deleteSnapshot;
import static dev.strata.csi.e2e.SnapshotTest.deleteVolume;
import static dev.strata.csi.e2e.SnapshotTest.from;
import static dev.strata.csi.e2e.SnapshotTest.publish;
import static dev.strata.csi.e2e.SnapshotTest.snapshot;
import static dev.strata.csi.e2e.SnapshotTest.statsTotal;
import static dev.strata.csi.e2e.SnapshotTest.unpublish;
import static dev.strata.csi.e2e.VolumeData.read;
import static dev.strata.csi.e2e.VolumeData.write;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Restore and clone onto another node, as external-provisioner asks for them when the scheduler
 * put the pod on another node than the one holding the data (WaitForFirstConsumer): CreateVolume
 * with a content source on node-a and a topology requirement naming node-b. The content streams
 * through controller-server; a controller killed mid-copy resumes it; a call's deadline leaves
 * the copy going for the retried call.
 */
@Tag("root")
class CrossNodeTest {

    private static final Pattern RECEIVED = Pattern.compile("received_bytes: (\\d+)");

    @TempDir
    static Path dir;

    static Cluster cluster;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, "node-a", "node-b");
        PipelineTest.cluster = cluster;
        SnapshotTest.cluster = cluster;
    }

    @AfterAll
    static void stop() throws Exception {
        PipelineTest.cluster = null;
        SnapshotTest.cluster = null;
        if (cluster != null) {
            cluster.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir));
    }

    @AfterEach
    void everythingDeletedLeavesThePoolsEmpty() throws Exception {
        for (String node : List.of("node-a", "node-b")) {
            try (Stream<Path> files = Files.walk(cluster.node(node).pool())) {
                List<Path> left = files.filter(file -> file.toString().endsWith(".img") || file.toString().endsWith(".record")).toList();
                assertEquals(List.of(), left, "every volume and snapshot was deleted, no temporary snapshot is left");
            }
        }
    }

    /**
     * xfs written on node-a, snapshotted in use, written again: restored on node-b it holds the
     * content at snapshot time, cloned on node-b (in use: through a temporary snapshot) the current
     * content, in a larger volume whose filesystem grows at stage; the snapshot still restores on
     * node-b once its source is deleted. (xfs: it grows online without CAP_SYS_RESOURCE, which
     * ext4's resize needs and this sandbox withholds.)
     */
    @Test
    void restoreAndCloneOntoAnotherNode() throws Exception {
        VolumeCapability xfs = PipelineTest.mount("xfs");
        Volume source = create("pvc-source", 320 * MIB, xfs, "node-a", null);
        var mounted = publish("node-a", source, xfs);
        long smaller = statsTotal(mounted);
        String then = write(mounted.target().resolve("data"), 4 * MIB);
        Snapshot snapshot = snapshot("snap-source", source);
        String now = write(mounted.target().resolve("data"), 5 * MIB);
        SystemState.run("sync", "-f", mounted.target().toString());

        Volume restored = create("pvc-restored", 0, xfs, "node-b", from(snapshot));
        assertEquals("local/node-b/pvc-restored", restored.getVolumeId());
        assertEquals(320 * MIB, restored.getCapacityBytes(), "as large as the snapshot");
        assertEquals(from(snapshot), restored.getContentSource());
        var onB = publish("node-b", restored, xfs);
        assertEquals(then, read(onB.target().resolve("data")), "the content at snapshot time, on node-b");
        SnapshotTest.delete(onB);

        Volume clone = create("pvc-clone", 384 * MIB, xfs, "node-b", from(source));
        assertEquals("local/node-b/pvc-clone", clone.getVolumeId());
        var cloneOnB = publish("node-b", clone, xfs);
        assertEquals(now, read(cloneOnB.target().resolve("data")), "the source's current content, on node-b");
        long larger = statsTotal(cloneOnB);
        assertTrue(larger > smaller + 64 * MIB * 8 / 10, "the filesystem grew to the larger volume at stage: " + smaller + " -> " + larger);
        assertFalse(cluster.node("node-b").process().output().contains("made filesystem"), "node-b formatted nothing");
        assertTrue(cluster.node("node-a").process().output().contains("snapshot=transfer.pvc-clone"),
                "the clone of a volume in use read a temporary snapshot of it");
        assertEquals(List.of(snapshot.getSnapshotId()), cluster.controller().listSnapshots(ListSnapshotsRequest.getDefaultInstance())
                .getEntriesList().stream().map(entry -> entry.getSnapshot().getSnapshotId()).toList(), "only the user's snapshot");
        SnapshotTest.delete(cloneOnB);

        SnapshotTest.delete(mounted);
        Volume again = create("pvc-restored-again", 0, xfs, "node-b", from(snapshot));
        var againOnB = publish("node-b", again, xfs);
        assertEquals(then, read(againOnB.target().resolve("data")), "the snapshot outlives its source, and restores on node-b");
        SnapshotTest.delete(againOnB);
        deleteSnapshot(snapshot);
    }

    /** A raw block volume, detached, cloned onto node-b: every byte of the device, and as sparse. */
    @Test
    void aBlockVolumeArrivesByteForByte() throws Exception {
        VolumeCapability block = PipelineTest.block();
        Volume source = create("pvc-block", 48 * MIB, block, "node-a", null);
        var attached = publish("node-a", source, block);
        byte[] data = new byte[(int) (3 * MIB)];
        new Random(5).nextBytes(data);
        try (RandomAccessFile device = new RandomAccessFile(attached.target().toFile(), "rw")) {
            device.seek(7 * MIB + 512);
            device.write(data);
            device.seek(40 * MIB);
            device.write(data, 0, 4096);
            device.getFD().sync();
        }
        unpublish(attached);

        Volume clone = create("pvc-block-clone", 0, block, "node-b", from(source));
        Path sourceImage = cluster.node("node-a").pool().resolve("pvc-block.img");
        Path cloneImage = cluster.node("node-b").pool().resolve("pvc-block-clone.img");
        assertEquals(ContentTransferTest.sha256(sourceImage), ContentTransferTest.sha256(cloneImage), "byte for byte");
        long allocated = ContentTransferTest.allocatedBytes(cloneImage);
        assertTrue(allocated < 5 * MIB, "the copy is as sparse as its content: " + allocated);
        var onB = publish("node-b", clone, block);
        try (RandomAccessFile device = new RandomAccessFile(onB.target().toFile(), "r")) {
            byte[] back = new byte[data.length];
            device.seek(7 * MIB + 512);
            device.readFully(back);
            assertTrue(java.util.Arrays.equals(data, back), "the device on node-b reads what was written on node-a");
        }
        SnapshotTest.delete(onB);
        deleteVolume(source);
    }

    /**
     * controller-server killed in the middle of a copy: node-b keeps what it has on disk, the
     * restarted controller's retried CreateVolume resumes there, and the volume is the source's.
     */
    @Test
    void aCopyCutShortByAControllerCrashResumes() throws Exception {
        Volume source = create("pvc-big", 320 * MIB, PipelineTest.block(), "node-a", null);
        Path image = cluster.node("node-a").pool().resolve("pvc-big.img");
        TransferCrashTest.write(image, 0, 256 * MIB, 11);
        Path record = cluster.node("node-b").pool().resolve("pvc-big-clone.record");

        CompletableFuture<Volume> first = CompletableFuture.supplyAsync(() -> clone("pvc-big-clone", source));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (received(record) == 0) {
            assertTrue(System.nanoTime() < deadline, "node-b recorded progress:\n" + cluster.logs());
            assertFalse(first.isDone(), "the copy outran the test");
            Thread.sleep(10);
        }
        cluster.killController(0);
        long kept = received(record);
        cluster.startController(0);
        cluster.awaitRegistered(0);
        assertTrue(Files.readString(record).contains("state: RECEIVING"), "never READY unfinished");

        Volume clone = retried(() -> clone("pvc-big-clone", source));
        assertEquals("local/node-b/pvc-big-clone", clone.getVolumeId());
        cluster.node("node-b").process().awaitOutput("resuming transfer\" volume=pvc-big-clone ");
        assertTrue(kept > 0);
        assertEquals(ContentTransferTest.sha256(image),
                ContentTransferTest.sha256(cluster.node("node-b").pool().resolve("pvc-big-clone.img")), "byte for byte");
        deleteVolume(clone);
        deleteVolume(source);
    }

    /** A CreateVolume whose deadline passes mid-copy leaves the copy going; the retried call waits for that same copy. */
    @Test
    void theRetriedCallJoinsTheCopyItsFirstCallStarted() throws Exception {
        Volume source = create("pvc-slow", 256 * MIB, PipelineTest.block(), "node-a", null);
        TransferCrashTest.write(cluster.node("node-a").pool().resolve("pvc-slow.img"), 0, 192 * MIB, 12);
        StatusRuntimeException cut = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class,
                () -> cluster.controller().withDeadlineAfter(1500, TimeUnit.MILLISECONDS).createVolume(request("pvc-slow-clone", source)));
        assertTrue(cut.getStatus().getCode() == Status.Code.DEADLINE_EXCEEDED || cut.getStatus().getCode() == Status.Code.ABORTED,
                cut.getStatus().toString());
        Volume clone = retried(() -> clone("pvc-slow-clone", source));
        assertEquals("local/node-b/pvc-slow-clone", clone.getVolumeId());
        // node-b's log holds the class's earlier tests too: only this volume's lines count.
        String log = cluster.node("node-b").process().output();
        assertEquals(1, count(log, "volume created to receive content\" volume=pvc-slow-clone "), "one copy, joined by the retry:\n" + log);
        assertFalse(log.contains("resuming transfer\" volume=pvc-slow-clone "), "the first copy was never cut:\n" + log);
        deleteVolume(clone);
        deleteVolume(source);
    }

    private static CreateVolumeRequest request(String name, Volume source) {
        return CreateVolumeRequest.newBuilder()
                .setName(name)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(source.getCapacityBytes()))
                .addVolumeCapabilities(PipelineTest.block())
                .setVolumeContentSource(VolumeContentSource.newBuilder().setVolume(
                        VolumeContentSource.VolumeSource.newBuilder().setVolumeId(source.getVolumeId())))
                .setAccessibilityRequirements(TopologyRequirement.newBuilder()
                        .addPreferred(PipelineTest.on("node-b")).addRequisite(PipelineTest.on("node-b")))
                .build();
    }

    private static Volume clone(String name, Volume source) {
        return cluster.controller().createVolume(request(name, source)).getVolume();
    }

    /** The call repeated as external-provisioner repeats it while the answer is ABORTED or UNAVAILABLE. */
    private static Volume retried(java.util.function.Supplier<Volume> call) throws InterruptedException {
        try {
            return SidecarRetry.untilDone(java.time.Duration.ofSeconds(120), call);
        } catch (StatusRuntimeException e) {
            throw new AssertionError(e.getStatus() + "\n" + cluster.logs(), e);
        }
    }

    private static long received(Path record) {
        try {
            Matcher matcher = RECEIVED.matcher(Files.readString(record));
            return matcher.find() ? Long.parseLong(matcher.group(1)) : 0;
        } catch (java.io.IOException e) {
            return 0; // not there yet, or being replaced
        }
    }

    private static int count(String text, String part) {
        int count = 0;
        for (int at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + 1)) {
            count++;
        }
        return count;
    }
}
