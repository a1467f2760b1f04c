package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.ContentTransferTest.sha256;
import static dev.strata.csi.e2e.PipelineTest.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.DeleteVolumeRequest;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.ContentStart;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.ReceiveVolumeRequest;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.agent.api.WriteContentResponse;
import dev.strata.csi.testing.Exposition;
import dev.strata.csi.testing.LoopFilesystem;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Copies across nodes that nobody comes back for: the node-servers run with an
 * --abandoned-copy-expiry of {@link #EXPIRY}, and the test plays controller-server's relay, which
 * it stops mid-copy (past the first checkpoint) as a controller that forgot the copy would. The
 * partly received image is removed once idle for the expiry, at start too, its capacity given
 * back; one whose copy comes back within the expiry is kept and completes byte for byte.
 */
@Tag("root")
class AbandonedCopyTest {

    private static final Duration EXPIRY = Duration.ofSeconds(12);
    /** Sparse: the reservation of the partial image is what shows in the pool's capacity. */
    private static final long SIZE = 2048 * MIB;
    private static final long DATA = 128 * MIB;
    /**
     * What node-b's free space moves by besides the images (xfs's log and metadata): its pool is a
     * filesystem of its own, so that no other work on the machine can move the figures compared.
     */
    private static final long NOISE = 32 * MIB;

    @TempDir
    static Path dir;

    private static LoopFilesystem poolB;
    private static Cluster cluster;
    private static Relays relays;
    private static Path source;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        poolB = LoopFilesystem.mount(dir.resolve("node-b-pool.img"), 8L << 30, dir.resolve("node-b/pool"));
        cluster = Cluster.start(dir, List.of("--agent-plaintext", "true"), List.of(),
                Map.of("ABANDONED_COPY_EXPIRY", EXPIRY.toSeconds() + "s"), "node-a", "node-b");
        relays = new Relays(cluster);
        source = TransferCrashTest.source(cluster, SIZE, DATA, 3);
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        if (poolB != null) {
            poolB.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir), "the suite left mounts or loop devices behind");
    }

    @Test
    void anAbandonedPartialImageIsRemovedAndItsCapacityGivenBack() throws Exception {
        String name = "pvc-abandoned";
        long poolBefore = relays.poolAvailable("node-b");
        // Once GetCapacity agrees with the pool: the agent reports at its next renewal what an earlier test freed.
        long capacityBefore = cluster.capacity("node-b", available -> Math.abs(available - poolBefore) < NOISE);

        long received = abandonMidCopy(name);
        long poolReceiving = relays.poolAvailable("node-b");
        assertTrue(poolReceiving < poolBefore - (SIZE - DATA) + NOISE,
                "the partial image reserves its capacity: " + poolBefore + " -> " + poolReceiving);
        long capacityReceiving = cluster.capacity("node-b", available -> available < capacityBefore - (SIZE - DATA) + NOISE);
        assertTrue(capacityReceiving < capacityBefore - (SIZE - DATA) + NOISE, "GetCapacity: " + capacityBefore + " -> " + capacityReceiving);

        Matcher removal = awaitRemoval(name);
        assertEquals(received, Long.parseLong(removal.group(1)), "the log names the bytes received:\n" + removal.group());
        assertTrue(Long.parseLong(removal.group(2)) >= EXPIRY.toSeconds(), "and how long it was idle:\n" + removal.group());
        assertEquals(List.of(), poolFiles(name), "image file and record gone");
        long poolAfter = relays.poolAvailable("node-b");
        assertTrue(Math.abs(poolAfter - poolBefore) < NOISE, "the pool's capacity is back: " + poolBefore + " -> " + poolAfter);
        long capacityAfter = cluster.capacity("node-b", available -> Math.abs(available - capacityBefore) < NOISE);
        assertTrue(Math.abs(capacityAfter - capacityBefore) < NOISE, "GetCapacity is back: " + capacityBefore + " -> " + capacityAfter);

        // A late step of the forgotten copy fails cleanly, and the copy made again starts over.
        StatusRuntimeException late = assertThrows(StatusRuntimeException.class, () -> writeStart(name));
        assertEquals(Status.Code.FAILED_PRECONDITION, late.getStatus().getCode(), late.getStatus().toString());
        assertTrue(late.getStatus().getDescription().contains("not being received"), late.getStatus().toString());
        AtomicLong again = new AtomicLong();
        copy(name, again);
        assertEquals(DATA, again.get(), "started over: everything sent");
        assertEquals(sha256(source), sha256(image(name)), "byte for byte");
        delete(name);
    }

    /** The retried CreateVolume asks ReceiveVolume again within the expiry, over and over: the image is kept, and resumes. */
    @Test
    void aCopyThatComesBackWithinTheExpiryIsKeptAndCompletes() throws Exception {
        String name = "pvc-kept";
        long received = abandonMidCopy(name);
        long until = System.nanoTime() + EXPIRY.multipliedBy(2).toNanos();
        while (System.nanoTime() < until) {
            Thread.sleep(EXPIRY.dividedBy(3).toMillis());
            ManagedChannel b = relays.channel("node-b");
            try {
                var reply = NodeAgentGrpc.newBlockingStub(b).withCallCredentials(relays.token()).withDeadlineAfter(30, TimeUnit.SECONDS)
                        .receiveVolume(receiveRequest(name));
                assertEquals(received, reply.getReceivedBytes(), "still there, with its progress");
            } finally {
                b.shutdownNow();
            }
        }
        assertTrue(Files.readString(record(name)).contains("state: RECEIVING"));

        AtomicLong second = new AtomicLong();
        copy(name, second);
        assertTrue(second.get() <= DATA - received, "resumed at " + received + ": sent " + second.get());
        assertEquals(sha256(source), sha256(image(name)), "byte for byte");
        assertFalse(removal(name).matcher(cluster.node("node-b").process().output()).find(), cluster.logs());
        delete(name);
    }

    /** A stream that writes for longer than the expiry holds the image's lock: never removed under it. */
    @Test
    void aStreamLongerThanTheExpiryIsNotCutOff() throws Exception {
        String name = "pvc-slow";
        ManagedChannel b = relays.channel("node-b");
        try {
            NodeAgentGrpc.newBlockingStub(b).withCallCredentials(relays.token()).withDeadlineAfter(30, TimeUnit.SECONDS)
                    .receiveVolume(receiveRequest(name));
            CompletableFuture<WriteContentResponse> result = new CompletableFuture<>();
            StreamObserver<WriteContentRequest> stream = writeContent(b, result);
            stream.onNext(start(name, "slow/" + name));
            long until = System.nanoTime() + EXPIRY.multipliedBy(3).dividedBy(2).toNanos();
            for (long offset = 0; System.nanoTime() < until; offset += MIB) {
                byte[] data = new byte[(int) MIB];
                new java.util.Random(offset).nextBytes(data);
                stream.onNext(WriteContentRequest.newBuilder().setName(name).setChunk(ContentChunk.newBuilder().setData(
                        dev.strata.csi.agent.api.ContentData.newBuilder().setOffset(offset).setData(com.google.protobuf.ByteString.copyFrom(data))
                                .setCrc32C(ContentTransferTest.crc32c(data)))).build());
                Thread.sleep(500);
            }
            stream.onCompleted(); // before the content's end: resumable
            ExecutionException ended = assertThrows(ExecutionException.class, () -> result.get(30, TimeUnit.SECONDS));
            assertEquals(Status.Code.ABORTED, Status.fromThrowable(ended.getCause()).getCode(), ended.getCause().toString());
        } finally {
            b.shutdownNow();
        }
        String recorded = Files.readString(record(name));
        assertTrue(recorded.contains("state: RECEIVING") && recorded.contains("received_bytes"), recorded);

        // Other content than the slow stream's: the copy starts the image over, and completes.
        AtomicLong copied = new AtomicLong();
        copy(name, copied);
        assertEquals(DATA, copied.get());
        assertEquals(sha256(source), sha256(image(name)), "byte for byte");
        delete(name);
    }

    /** A copy abandoned while its node was down is removed at start, before the agent serves a call. */
    @Test
    void anAbandonedCopyIsRemovedAtStart() throws Exception {
        // Made while node-b keeps its copies: it is not gone before node-b stops.
        cluster.restartNode("node-b", Cluster.Launch.HOST.with("ABANDONED_COPY_EXPIRY", "1h"));
        long received = abandonMidCopy("pvc-down");
        cluster.node("node-b").process().close();
        Thread.sleep(EXPIRY.plusSeconds(2).toMillis());

        String http = "127.0.0.1:" + Cluster.freePort();
        var node = cluster.startNode("node-b", Cluster.Launch.HOST.with("HTTP_ENDPOINT", http));
        String output = node.process().output();
        Matcher removal = removal("pvc-down").matcher(output);
        assertTrue(removal.find(), "removed at start:\n" + output);
        assertEquals(received, Long.parseLong(removal.group(1)));
        int agentListening = output.indexOf("endpoint=tcp://");
        assertTrue(agentListening > removal.start(), "before the agent listened:\n" + output);
        assertEquals(List.of(), poolFiles("pvc-down"));
        assertEquals(1, Exposition.scrape(http).value("strata_abandoned_copies_removed_total", Map.of()));
    }

    /**
     * Starts a copy of the source into {@code name} on node-b, stops it past its first checkpoint as
     * a controller that forgot it would, and returns how far the record says it got.
     */
    private static long abandonMidCopy(String name) throws Exception {
        AtomicLong progress = new AtomicLong();
        Thread copying = Thread.ofPlatform().start(() -> {
            try {
                copy(name, progress);
            } catch (Exception e) {
                // stopped: what the test wants
            }
        });
        while (progress.get() < 80 * MIB && copying.isAlive()) {
            Thread.sleep(10);
        }
        copying.interrupt();
        copying.join(30_000);
        assertTrue(progress.get() < DATA, "stopped mid-copy: " + progress.get());
        cluster.node("node-b").process().awaitOutputMatching(
                Pattern.compile("transfer interrupted; the retry resumes\"? volume=" + Pattern.quote(name) + " "));
        String recorded = Files.readString(record(name));
        assertTrue(recorded.contains("state: RECEIVING") && recorded.contains("receive_progress_time"), recorded);
        Matcher bytes = Pattern.compile("received_bytes: (\\d+)").matcher(recorded);
        assertTrue(bytes.find(), recorded);
        long received = Long.parseLong(bytes.group(1));
        assertTrue(received >= 64 * MIB && received < DATA, "progress on disk: " + received);
        return received;
    }

    private static Pattern removal(String name) {
        return Pattern.compile("removed partly received volume[^\\n]* volume=" + Pattern.quote(name)
                + " received_bytes=(\\d+) capacity_bytes=\\d+ idle_seconds=(\\d+)");
    }

    /** The log line of the image's removal, once there (the expiry and a round of the check at most, with room for a slow machine). */
    private static Matcher awaitRemoval(String name) throws Exception {
        var process = cluster.node("node-b").process();
        Pattern pattern = removal(name);
        long deadline = System.nanoTime() + EXPIRY.multipliedBy(4).toNanos();
        while (System.nanoTime() < deadline) {
            Matcher found = pattern.matcher(process.output());
            if (found.find()) {
                return found;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("not removed:\n" + cluster.logs());
    }

    private static Volume copy(String name, AtomicLong progress) throws Exception {
        return relays.copy("node-a", "pvc-source", "node-b", name, SIZE, progress);
    }

    private static ReceiveVolumeRequest receiveRequest(String name) {
        return ReceiveVolumeRequest.newBuilder().setName(name).setCapacityBytes(SIZE).setAllocation(Allocation.SPARSE)
                .setSource(ContentSource.newBuilder().setVolume("pvc-source")).build();
    }

    /** A WriteContent stream with its start only, for an image that may be gone: its answer. */
    private static WriteContentResponse writeStart(String name) throws Exception {
        ManagedChannel b = relays.channel("node-b");
        try {
            CompletableFuture<WriteContentResponse> result = new CompletableFuture<>();
            StreamObserver<WriteContentRequest> stream = writeContent(b, result);
            stream.onNext(start(name, "late/" + name));
            stream.onCompleted();
            return result.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw (Exception) e.getCause();
        } finally {
            b.shutdownNow();
        }
    }

    private static StreamObserver<WriteContentRequest> writeContent(ManagedChannel channel, CompletableFuture<WriteContentResponse> result) {
        return Relays.writeContent(NodeAgentGrpc.newStub(channel).withCallCredentials(relays.token()).withDeadlineAfter(60, TimeUnit.SECONDS),
                result);
    }

    private static WriteContentRequest start(String name, String tag) {
        return WriteContentRequest.newBuilder().setName(name).setChunk(ContentChunk.newBuilder()
                .setStart(ContentStart.newBuilder().setTag(tag).setSizeBytes(SIZE))).build();
    }

    private static void delete(String name) {
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("local/node-b/" + name).build());
    }

    private static Path image(String name) {
        return cluster.node("node-b").pool().resolve(name + ".img");
    }

    private static Path record(String name) {
        return cluster.node("node-b").pool().resolve(name + ".record");
    }

    /** node-b's pool files of the image {@code name}. */
    private static List<String> poolFiles(String name) throws Exception {
        return ContentTransferTest.poolFiles(cluster.node("node-b").pool(), name + ".");
    }
}
