package dev.strata.csi.controller.local;

import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.ReadContentRequest;
import dev.strata.csi.agent.api.ReceiveVolumeRequest;
import dev.strata.csi.agent.api.ReceiveVolumeResponse;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyRequest;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyResponse;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.WriteSnapshotCopyResponse;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.StreamReadiness;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Copies a volume's content from the node that holds it to another node, through this controller:
 * node agents take calls from controller-server only (per-node identity), so neither node can ask
 * the other for anything. The relay reads the source node's ReadContent stream and writes each
 * message into the target node's WriteContent stream as it comes, one message at a time: it asks
 * the source for the next chunk only once the target's stream takes more, so the controller never
 * holds more than a chunk and the transports' windows, whatever the volume's size.
 *
 * <p>The target records how far it has its content on disk (ReceiveVolume says where), and the
 * source skips what is there when the content is still the same, so a copy cut short by a crash of
 * either node or of this controller resumes; the target compares digests before the new volume is
 * READY.
 */
public final class ContentRelay {

    /** A side that sends or takes nothing for this long is gone: the copy ends UNAVAILABLE, to be retried. */
    static final Duration STALL = Duration.ofMinutes(2);
    /** The slowest the target may digest its volume at the end, from its disk (bytes per second). */
    private static final long SLOWEST_DIGEST = 20L << 20;

    /** A node agent as the relay calls it: streams, and the unary ReceiveVolume. */
    public record Agent(String nodeId, NodeAgentGrpc.NodeAgentStub streams, NodeAgentGrpc.NodeAgentBlockingStub calls) {}

    private final RelayMetrics metrics;
    private final Log log;

    public ContentRelay(RelayMetrics metrics, Log log) {
        this.metrics = metrics;
        this.log = log;
    }

    /**
     * The volume {@code receive} names on {@code target}, with the content {@code read} names on
     * {@code holder}: made there as ReceiveVolume asks (in the pool it names: either pool reads and
     * writes the same stream), or resumed, or found complete, and READY on return. Its record
     * names {@code receive}'s source as where it came from (the volume, where {@code read} is a
     * temporary snapshot of it). {@code progress} counts the data bytes relayed.
     */
    public Volume copy(Agent holder, ContentSource read, Agent target, ReceiveVolumeRequest receive, AtomicLong progress)
            throws InterruptedException {
        String name = receive.getName();
        long capacityBytes = receive.getCapacityBytes();
        ReceiveVolumeResponse receiving = target.calls().receiveVolume(receive);
        if (receiving.hasVolume()) {
            return receiving.getVolume();
        }
        long started = System.nanoTime();
        Volume volume = relay(holder, ReadContentRequest.newBuilder().setSource(read)
                .setTag(receiving.getTag()).setOffset(receiving.getReceivedBytes()).build(), target, "volume " + name, name,
                capacityBytes, progress, RelayMetrics.VOLUME, target.streams()::writeContent).getVolume();
        log.info("volume content copied across nodes", "volume", name, "from", holder.nodeId(), "to", target.nodeId(),
                "resumed_at", receiving.getReceivedBytes(), "data_bytes", progress.get(),
                "seconds", String.format("%.1f", (System.nanoTime() - started) / 1e9));
        return volume;
    }

    /** A snapshot's copy as it goes: made anew, or resumed, or found complete ({@code snapshot} set). */
    public record SnapshotCopy(Snapshot snapshot, long generation, String base, long resumedAt) {}

    /**
     * The copy {@code receive} names on {@code target}, of the snapshot {@code receive} names on
     * {@code holder}: made, resumed or found complete (the target answers which base it is built on
     * and how far it has it), complete on return. {@code progress} counts the data bytes relayed.
     */
    public SnapshotCopy copySnapshot(Agent holder, Agent target, ReceiveSnapshotCopyRequest receive, AtomicLong progress)
            throws InterruptedException {
        ReceiveSnapshotCopyResponse receiving = target.calls().receiveSnapshotCopy(receive);
        if (receiving.hasSnapshot()) {
            return new SnapshotCopy(receiving.getSnapshot(), -1, receiving.getBaseSnapshot(), receiving.getReceivedBytes());
        }
        String name = receive.getName();
        WriteSnapshotCopyResponse written = relay(holder, ReadContentRequest.newBuilder()
                .setSource(ContentSource.newBuilder().setSnapshot(name))
                .setBaseSnapshot(receiving.getBaseSnapshot())
                .setTag(receiving.getTag()).setOffset(receiving.getReceivedBytes()).build(),
                target, "snapshot " + name, name, receive.getSnapshot().getCapacityBytes(), progress, RelayMetrics.SNAPSHOT_COPY,
                target.streams()::writeSnapshotCopy);
        return new SnapshotCopy(written.getSnapshot(), written.getGeneration(), receiving.getBaseSnapshot(), receiving.getReceivedBytes());
    }

    /** How the target's stream is opened: WriteContent or WriteSnapshotCopy, which take the same stream. */
    @FunctionalInterface
    private interface Opener<R> {
        StreamObserver<WriteContentRequest> open(StreamObserver<R> responses);
    }

    /** What the relay thread hears from either stream. */
    private sealed interface Event {}
    private record FromHolder(ContentChunk chunk) implements Event {}
    private record HolderDone() implements Event {}
    private record HolderFailed(Status status) implements Event {}
    private record TargetDone(Object response) implements Event {}
    private record TargetFailed(Status status) implements Event {}

    /** {@link #stream}, timed in {@link RelayMetrics} by {@code content} and outcome. */
    private <R> R relay(Agent holder, ReadContentRequest read, Agent target, String what, String name, long capacityBytes,
            AtomicLong progress, String content, Opener<R> open) throws InterruptedException {
        long started = System.nanoTime();
        Status.Code outcome = Status.Code.UNKNOWN;
        try {
            R answered = stream(holder, read, target, what, name, capacityBytes, progress, content, open);
            outcome = Status.Code.OK;
            return answered;
        } catch (StatusRuntimeException e) {
            outcome = e.getStatus().getCode();
            throw e;
        } catch (CsiException e) {
            outcome = e.code();
            throw e;
        } finally {
            metrics.copied(content, outcome, started);
        }
    }

    private <R> R stream(Agent holder, ReadContentRequest read, Agent target, String what, String name, long capacityBytes,
            AtomicLong progress, String content, Opener<R> open) throws InterruptedException {
        BlockingQueue<Event> events = new LinkedBlockingQueue<>(); // holds a chunk at most: the holder is asked for one at a time
        Writing<R> writing = new Writing<>(events);
        open.open(writing);
        Reading reading = new Reading(events);
        holder.streams().readContent(read, reading);
        boolean holderDone = false;
        try {
            while (true) {
                Duration wait = holderDone ? STALL.plusSeconds(capacityBytes / SLOWEST_DIGEST) : STALL;
                Event event = events.poll(wait.toSeconds(), TimeUnit.SECONDS);
                switch (event) {
                    case null -> throw CsiException.unavailable("copying " + what + " from node " + holder.nodeId()
                            + " to " + target.nodeId() + ": nothing happened for " + wait.toSeconds() + " s");
                    case FromHolder(ContentChunk chunk) -> {
                        writing.readiness().await();
                        writing.call().onNext(WriteContentRequest.newBuilder().setName(name).setChunk(chunk).build());
                        if (chunk.hasData()) {
                            int bytes = chunk.getData().getData().size();
                            progress.addAndGet(bytes);
                            metrics.relayed(holder.nodeId(), target.nodeId(), content, bytes);
                        }
                        reading.call().request(1);
                    }
                    case HolderDone() -> {
                        holderDone = true;
                        writing.call().onCompleted();
                    }
                    case HolderFailed(Status status) -> throw new StatusRuntimeException(status.augmentDescription(
                            "reading the content of " + what + "'s source on node " + holder.nodeId()));
                    case TargetDone(Object response) -> {
                        @SuppressWarnings("unchecked") // the one kind of response the target's stream answers with
                        R answered = (R) response;
                        return answered;
                    }
                    case TargetFailed(Status status) -> throw new StatusRuntimeException(status.augmentDescription(
                            "writing " + what + " on node " + target.nodeId()));
                }
            }
        } catch (RuntimeException | InterruptedException e) {
            // Whichever side is still streaming stops: the target records how far it got.
            reading.call().cancel("the copy of " + what + " ended", null);
            writing.call().cancel("the copy of " + what + " ended", null);
            throw e;
        }
    }

    /** The holder's ReadContent: one chunk asked for at a time. */
    private static final class Reading implements ClientResponseObserver<ReadContentRequest, ContentChunk> {
        private final BlockingQueue<Event> events;
        private volatile ClientCallStreamObserver<ReadContentRequest> call;

        Reading(BlockingQueue<Event> events) {
            this.events = events;
        }

        ClientCallStreamObserver<ReadContentRequest> call() {
            return call;
        }

        @Override
        public void beforeStart(ClientCallStreamObserver<ReadContentRequest> call) {
            this.call = call;
            call.disableAutoRequestWithInitial(1);
        }

        @Override
        public void onNext(ContentChunk chunk) {
            events.add(new FromHolder(chunk));
        }

        @Override
        public void onError(Throwable t) {
            events.add(new HolderFailed(Status.fromThrowable(t)));
        }

        @Override
        public void onCompleted() {
            events.add(new HolderDone());
        }
    }

    /** The target's WriteContent: written only while its transport takes more. */
    private static final class Writing<R> implements ClientResponseObserver<WriteContentRequest, R> {
        private final BlockingQueue<Event> events;
        private volatile ClientCallStreamObserver<WriteContentRequest> call;
        private volatile StreamReadiness readiness;

        Writing(BlockingQueue<Event> events) {
            this.events = events;
        }

        ClientCallStreamObserver<WriteContentRequest> call() {
            return call;
        }

        StreamReadiness readiness() {
            return readiness;
        }

        @Override
        public void beforeStart(ClientCallStreamObserver<WriteContentRequest> call) {
            this.call = call;
            this.readiness = new StreamReadiness(call, STALL);
        }

        @Override
        public void onNext(R response) {
            events.add(new TargetDone(response));
        }

        @Override
        public void onError(Throwable t) {
            Status status = Status.fromThrowable(t);
            readiness.fail(status);
            events.add(new TargetFailed(status));
        }

        @Override
        public void onCompleted() {
            // the response came with onNext
        }
    }
}
