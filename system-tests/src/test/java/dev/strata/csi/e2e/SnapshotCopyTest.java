package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentData;
import dev.strata.csi.agent.api.ContentEnd;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.ContentStart;
import dev.strata.csi.agent.api.CreateSnapshotRequest;
import dev.strata.csi.agent.api.CreateVolumeRequest;
import dev.strata.csi.agent.api.DeleteSnapshotRequest;
import dev.strata.csi.agent.api.DeleteVolumeRequest;
import dev.strata.csi.agent.api.GetAllocatedRangesRequest;
import dev.strata.csi.agent.api.ListSnapshotsRequest;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.ReadContentRequest;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyResponse;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.agent.api.WriteSnapshotCopyResponse;
import dev.strata.csi.linux.FileDescriptor;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.CallCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Snapshot copies between two node-servers as processes (the node side of the VolumeSnapshotClass
 * parameter copies), the test in controller-server's place ({@link SnapshotCopyRelay}): a snapshot
 * with its copy nodes recorded, copied whole to the other node byte for byte, then a later one
 * incrementally (only what changed sent; a range rewritten with zeros a hole on the receiver);
 * each copy listed with its origin, restored from on its node, read from it again, its ranges
 * told, deleted. A stream cut short resumes, on a base too; a wrong digest is DATA_LOSS with
 * nothing left behind; a base of another volume or a later one is INVALID_ARGUMENT.
 */
@Tag("root")
class SnapshotCopyTest {

    private static final int BLOCK = 4096;
    private static final long SIZE = 64 * MIB;

    @TempDir
    static Path dir;

    static Cluster cluster;
    static CallCredentials token;
    static ManagedChannel channelA;
    static ManagedChannel channelB;
    static SnapshotCopyRelay copies;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, "node-a", "node-b");
        Relays relays = new Relays(cluster);
        token = relays.token();
        channelA = relays.channel("node-a");
        channelB = relays.channel("node-b");
        copies = new SnapshotCopyRelay(token);
    }

    @AfterAll
    static void stop() throws Exception {
        channelA.shutdownNow();
        channelB.shutdownNow();
        if (cluster != null) {
            cluster.close();
        }
    }

    @AfterEach
    void nothingLeftBehind() throws Exception {
        assertEquals(List.of(), SystemState.cleanUp(dir), "the test left mounts or loop devices behind");
    }

    @Test
    void aSnapshotIsCopiedWholeThenIncrementallyAndEachCopyIsASnapshotOfItsNode() throws Exception {
        Path source = volume("pvc-copied");
        Random random = new Random(36);
        write(source, 0, random, 5 * MIB);
        write(source, 20 * MIB, random, 3 * MIB);
        write(source, SIZE - 2 * BLOCK, random, BLOCK);

        Snapshot first = agent(channelA).createSnapshot(CreateSnapshotRequest.newBuilder().setName("snap-copied-1")
                .setSourceVolume("pvc-copied").addCopyNodes("node-b").build()).getSnapshot();
        assertEquals(List.of("node-b"), first.getCopyNodesList(), "the copy nodes, recorded");
        Snapshot again = agent(channelA).createSnapshot(CreateSnapshotRequest.newBuilder().setName("snap-copied-1")
                .setSourceVolume("pvc-copied").addCopyNodes("node-c").build()).getSnapshot();
        assertEquals(List.of("node-b"), again.getCopyNodesList(), "a snapshot taken keeps the nodes it recorded");
        assertEquals(List.of("node-b"), listed(channelA, "snap-copied-1").getCopyNodesList());

        // The first copy: whole. While RECEIVING it is not listed.
        ReceiveSnapshotCopyResponse receiving = copies.receive(channelB, "node-a", first, "snap-none", PoolKind.POOL_IMAGE);
        assertEquals("", receiving.getBaseSnapshot(), "no copy of that base here: the whole content is to be sent");
        assertFalse(receiving.hasSnapshot());
        assertTrue(agent(channelB).listSnapshots(ListSnapshotsRequest.getDefaultInstance()).getSnapshotsList().stream()
                .noneMatch(s -> s.getName().equals("snap-copied-1")), "a copy being received is not listed");
        WriteSnapshotCopyResponse whole = copies.relay(channelA, "snap-copied-1", receiving, channelB, Integer.MAX_VALUE);
        assertEquals("node-a", whole.getSnapshot().getOriginNode());
        assertEquals(List.of("node-b"), whole.getSnapshot().getCopyNodesList());
        assertEquals(first.getCreationTime(), whole.getSnapshot().getCreationTime());
        assertEquals(8 * MIB + BLOCK, whole.getWrittenBytes(), "the data, not the holes");
        assertEquals(sha256(snapshotFile("node-a", "snap-copied-1")), sha256(snapshotFile("node-b", "snap-copied-1")), "byte for byte");
        assertEquals("node-a", listed(channelB, "snap-copied-1").getOriginNode(), "listed on node-b, with its origin");
        assertTrue(copies.receive(channelB, "node-a", first, "", PoolKind.POOL_IMAGE).hasSnapshot(), "asked again: complete");
        assertEquals(Status.Code.ALREADY_EXISTS, code(() -> copies.receive(channelB, "node-c", first, "", PoolKind.POOL_IMAGE)),
                "the same name from another node");

        // What changed: data rewritten in a few places, a MiB of data rewritten with zeros, a block past the old data.
        write(source, 64 * 1024, random, 16 * 1024);
        write(source, 21 * MIB, null, MIB);
        write(source, 40 * MIB, random, 64 * 1024);
        long changed = 16 * 1024 + 64 * 1024;
        Snapshot second = agent(channelA).createSnapshot(CreateSnapshotRequest.newBuilder().setName("snap-copied-2")
                .setSourceVolume("pvc-copied").addCopyNodes("node-b").build()).getSnapshot();

        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> read(channelA, "snap-copied-1", "snap-copied-2")), "a later base");
        volume("pvc-other");
        agent(channelA).createSnapshot(CreateSnapshotRequest.newBuilder().setName("snap-other").setSourceVolume("pvc-other").build());
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> read(channelA, "snap-copied-2", "snap-other")), "another volume's");
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> copies.receive(channelB, "node-a",
                second.toBuilder().setSourceVolume("pvc-elsewhere").build(), "snap-copied-1", PoolKind.POOL_IMAGE)),
                "a base of another volume on the receiver");

        receiving = copies.receive(channelB, "node-a", second, "snap-copied-1", PoolKind.POOL_IMAGE);
        assertEquals("snap-copied-1", receiving.getBaseSnapshot(), "built on the copy node-b holds");
        WriteSnapshotCopyResponse incremental = copies.relay(channelA, "snap-copied-2", receiving, channelB, Integer.MAX_VALUE);
        assertTrue(incremental.getWrittenBytes() >= changed && incremental.getWrittenBytes() <= changed + 2 * 64 * 1024,
                "only what changed is sent: " + incremental.getWrittenBytes() + " bytes for " + changed);
        Path copy = snapshotFile("node-b", "snap-copied-2");
        assertEquals(sha256(snapshotFile("node-a", "snap-copied-2")), sha256(copy), "byte for byte");
        for (Kernel.DataRange range : dataRanges(copy)) {
            assertTrue(range.offset() + range.length() <= 21 * MIB || range.offset() >= 22 * MIB,
                    "the MiB rewritten with zeros is a hole in the copy: " + range);
        }

        // The copy is a snapshot of node-b: restored from, read from again, its ranges told.
        agent(channelB).createVolume(CreateVolumeRequest.newBuilder().setName("pvc-restored").setCapacityBytes(SIZE)
                .setAllocation(Allocation.SPARSE).setSource(ContentSource.newBuilder().setSnapshot("snap-copied-2")).build());
        assertEquals(sha256(snapshotFile("node-a", "snap-copied-2")), sha256(cluster.node("node-b").pool().resolve("pvc-restored.img")),
                "restored on the copy's node, byte for byte");
        long data = 0;
        var chunks = NodeAgentGrpc.newBlockingStub(channelB).withCallCredentials(token).withDeadlineAfter(60, TimeUnit.SECONDS)
                .readContent(ReadContentRequest.newBuilder().setSource(ContentSource.newBuilder().setSnapshot("snap-copied-2"))
                        .setBaseSnapshot("snap-copied-1").build());
        while (chunks.hasNext()) {
            ContentChunk chunk = chunks.next();
            data += chunk.getData().getData().size();
        }
        assertTrue(data >= changed && data < 2 * MIB, "node-b sends what changed between its copies: " + data);
        long allocated = 0;
        var batches = NodeAgentGrpc.newBlockingStub(channelB).withCallCredentials(token).withDeadlineAfter(60, TimeUnit.SECONDS)
                .getAllocatedRanges(GetAllocatedRangesRequest.newBuilder().setSnapshot("snap-copied-2").build());
        while (batches.hasNext()) {
            allocated += batches.next().getRangesList().stream().mapToLong(r -> r.getLength()).sum();
        }
        assertTrue(allocated >= 7 * MIB, "the copy's allocated ranges: " + allocated);

        agent(channelB).deleteVolume(DeleteVolumeRequest.newBuilder().setName("pvc-restored").build());
        for (String snapshot : List.of("snap-copied-2", "snap-copied-1")) {
            agent(channelB).deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName(snapshot).build());
        }
        assertEquals(List.of(), ContentTransferTest.poolFiles(cluster.node("node-b").pool().resolve("snapshots"), "snap-"), "nothing left");
        for (String snapshot : List.of("snap-copied-2", "snap-copied-1", "snap-other")) {
            agent(channelA).deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName(snapshot).build());
        }
        for (String volume : List.of("pvc-copied", "pvc-other")) {
            agent(channelA).deleteVolume(DeleteVolumeRequest.newBuilder().setName(volume).build());
        }
    }

    @Test
    void anIncrementalCopyCutShortResumesWhereItGotTo() throws Exception {
        Path source = volume("pvc-resumed");
        Random random = new Random(39);
        write(source, 0, random, 8 * MIB);
        Snapshot first = agent(channelA).createSnapshot(CreateSnapshotRequest.newBuilder().setName("snap-resumed-1")
                .setSourceVolume("pvc-resumed").build()).getSnapshot();
        copies.copy(channelA, "node-a", first, channelB, "", PoolKind.POOL_IMAGE);
        write(source, 16 * MIB, random, 24 * MIB);
        write(source, MIB, null, MIB);
        Snapshot second = agent(channelA).createSnapshot(CreateSnapshotRequest.newBuilder().setName("snap-resumed-2")
                .setSourceVolume("pvc-resumed").build()).getSnapshot();

        ReceiveSnapshotCopyResponse receiving = copies.receive(channelB, "node-a", second, "snap-resumed-1", PoolKind.POOL_IMAGE);
        assertThrows(Exception.class, () -> copies.relay(channelA, "snap-resumed-2", receiving, channelB, 6), "cut short");
        ReceiveSnapshotCopyResponse resumed = receiveWhenFree(second, "snap-resumed-1");
        assertEquals("snap-resumed-1", resumed.getBaseSnapshot(), "a copy begun keeps its base");
        assertTrue(resumed.getReceivedBytes() > 16 * MIB, "progress recorded: " + resumed.getReceivedBytes());
        assertFalse(resumed.getTag().isEmpty());
        WriteSnapshotCopyResponse rest = copies.relay(channelA, "snap-resumed-2", resumed, channelB, Integer.MAX_VALUE);
        assertTrue(rest.getWrittenBytes() < 24 * MIB, "the rest only: " + rest.getWrittenBytes());
        assertEquals(sha256(snapshotFile("node-a", "snap-resumed-2")), sha256(snapshotFile("node-b", "snap-resumed-2")), "byte for byte");

        for (ManagedChannel channel : List.of(channelB, channelA)) {
            for (String snapshot : List.of("snap-resumed-2", "snap-resumed-1")) {
                agent(channel).deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName(snapshot).build());
            }
        }
        agent(channelA).deleteVolume(DeleteVolumeRequest.newBuilder().setName("pvc-resumed").build());
    }

    @Test
    void aCopyWhoseDigestDiffersIsRefusedAndRemoved() throws Exception {
        Snapshot snapshot = Snapshot.newBuilder().setName("snap-damaged").setSourceVolume("pvc-far").setCapacityBytes(8 * MIB)
                .setCreationTime(com.google.protobuf.Timestamp.newBuilder().setSeconds(1_700_000_000)).build();
        copies.receive(channelB, "node-a", snapshot, "", PoolKind.POOL_IMAGE);
        assertTrue(Files.exists(snapshotFile("node-b", "snap-damaged")));
        ByteBuffer data = ByteBuffer.wrap(new byte[BLOCK]);
        new Random(1).nextBytes(data.array());
        CompletableFuture<WriteSnapshotCopyResponse> result = new CompletableFuture<>();
        StreamObserver<WriteContentRequest> stream = NodeAgentGrpc.newStub(channelB).withCallCredentials(token)
                .withDeadlineAfter(30, TimeUnit.SECONDS).writeSnapshotCopy(Relays.answer(result));
        for (ContentChunk chunk : List.of(
                ContentChunk.newBuilder().setStart(ContentStart.newBuilder().setTag("test/damaged").setSizeBytes(8 * MIB)).build(),
                ContentChunk.newBuilder().setData(ContentData.newBuilder().setOffset(0).setData(ByteString.copyFrom(data.array()))
                        .setCrc32C(ImageContent.crc32c(data))).build(),
                ContentChunk.newBuilder().setEnd(ContentEnd.newBuilder().setSha256(ByteString.copyFrom(new byte[32]))).build())) {
            stream.onNext(WriteContentRequest.newBuilder().setName("snap-damaged").setChunk(chunk).build());
        }
        stream.onCompleted();
        var failure = assertThrows(java.util.concurrent.ExecutionException.class, () -> result.get(30, TimeUnit.SECONDS));
        assertEquals(Status.Code.DATA_LOSS, Status.fromThrowable(failure.getCause()).getCode());
        assertEquals(List.of(), ContentTransferTest.poolFiles(cluster.node("node-b").pool().resolve("snapshots"), "snap-damaged"),
                "the copy and its record removed");
    }

    private static ReceiveSnapshotCopyResponse receiveWhenFree(Snapshot snapshot, String base) throws InterruptedException {
        for (int attempt = 0; ; attempt++) {
            try {
                return copies.receive(channelB, "node-a", snapshot, base, PoolKind.POOL_IMAGE);
            } catch (StatusRuntimeException e) {
                if (e.getStatus().getCode() != Status.Code.ABORTED || attempt > 100) {
                    throw e;
                }
                Thread.sleep(100); // the cut stream's writer records its progress, then lets the copy go
            }
        }
    }


    private static void read(ManagedChannel channel, String snapshot, String base) {
        NodeAgentGrpc.newBlockingStub(channel).withCallCredentials(token).withDeadlineAfter(30, TimeUnit.SECONDS)
                .readContent(ReadContentRequest.newBuilder().setSource(ContentSource.newBuilder().setSnapshot(snapshot))
                        .setBaseSnapshot(base).build()).forEachRemaining(chunk -> { });
    }

    private static Status.Code code(Runnable call) {
        return Status.fromThrowable(assertThrows(StatusRuntimeException.class, call::run)).getCode();
    }

    private static NodeAgentGrpc.NodeAgentBlockingStub agent(ManagedChannel channel) {
        return NodeAgentGrpc.newBlockingStub(channel).withCallCredentials(token).withDeadlineAfter(60, TimeUnit.SECONDS);
    }

    private static Snapshot listed(ManagedChannel channel, String name) {
        return agent(channel).listSnapshots(ListSnapshotsRequest.getDefaultInstance()).getSnapshotsList().stream()
                .filter(s -> s.getName().equals(name)).findFirst().orElseThrow(() -> new AssertionError(name + " is not listed"));
    }

    /** A sparse image volume of {@link #SIZE} on node-a, detached: its file, written as its block device would be. */
    private static Path volume(String name) {
        agent(channelA).createVolume(CreateVolumeRequest.newBuilder().setName(name).setCapacityBytes(SIZE).setAllocation(Allocation.SPARSE).build());
        return cluster.node("node-a").pool().resolve(name + ".img");
    }

    private static Path snapshotFile(String node, String name) {
        return cluster.node(node).pool().resolve("snapshots").resolve(name + ".img");
    }

    /** {@code length} bytes at {@code offset}: random, or zeros written ({@code random} null). */
    private static void write(Path image, long offset, Random random, long length) throws Exception {
        byte[] bytes = new byte[(int) length];
        if (random != null) {
            random.nextBytes(bytes);
        }
        try (FileChannel file = FileChannel.open(image, StandardOpenOption.WRITE)) {
            ByteBuffer buffer = ByteBuffer.wrap(bytes);
            while (buffer.hasRemaining()) {
                file.write(buffer, offset + buffer.position());
            }
            file.force(true);
        }
    }

    private static List<Kernel.DataRange> dataRanges(Path file) throws Exception {
        Kernel kernel = new Kernel();
        try (FileDescriptor fd = kernel.open(file.toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC)) {
            return kernel.dataRanges(fd, Files.size(file));
        }
    }

    static String sha256(Path file) throws Exception {
        MessageDigest digest = MessageDigest.getInstance("SHA-256");
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            ByteBuffer buffer = ByteBuffer.allocate(1 << 20);
            long left = SIZE;
            while (left > 0 && channel.read(buffer.clear().limit((int) Math.min(buffer.capacity(), left))) > 0) {
                left -= buffer.position();
                digest.update(buffer.flip());
            }
        }
        return HexFormat.of().formatHex(digest.digest());
    }
}
