package dev.strata.csi.node.agent;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentData;
import dev.strata.csi.agent.api.ContentEnd;
import dev.strata.csi.agent.api.ContentStart;
import dev.strata.csi.agent.api.ContentZero;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.node.local.blocks.BlockRange;
import dev.strata.csi.node.local.blocks.ChangedBlocks;
import dev.strata.csi.node.local.blocks.DeltaChunks;
import dev.strata.csi.node.local.pool.VolumePool;
import dev.strata.csi.agent.api.ReadContentRequest;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.OutgoingContent;
import dev.strata.csi.node.local.pool.PoolSnapshots;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.StreamReadiness;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * ReadContent: a snapshot's or a detached volume's content, of whichever pool holds it
 * ({@link dev.strata.csi.node.local.pool.OutgoingCopies}), streamed to controller-server (see
 * {@link ImageContent}), on a thread of its own (the stream's onReady callbacks reach a handler
 * only once it has returned), never more than the transport's window ahead of the reader. The
 * source is held by its lock for as long as it streams: a volume against attachment, a snapshot
 * against deletion.
 *
 * <p>On a base snapshot (an incremental copy), only what changed since the base is sent: the
 * pool's changed-block engine ({@link ChangedBlocks#changed}) tells the ranges, and the source is
 * read whole, so that its digest is the one a full stream has, but only the changed ranges go
 * out ({@link DeltaChunks}): data, and zero ranges where the source reads zeros. Its tag names
 * both snapshots, so a stream cut short resumes only on the same pair.
 */
final class ContentSender {

    /** A reader that takes nothing for this long is gone: the stream ends and the volume is free again. */
    static final Duration STALL = Duration.ofMinutes(2);
    /** Data chunks sent before the crash point TRANSFER_SENT: mid-stream. */
    private static final int CHUNKS_BEFORE_CRASH_POINT = 4;

    /**
     * What a stream reads, under which tag, and the locks it holds until the stream ends; on a base,
     * the base and what changed since it.
     */
    private record Source(String name, OutgoingContent content, String tag, Optional<Delta> delta, List<VolumeLocks.Held> held)
            implements AutoCloseable {
        @Override
        public void close() {
            held.forEach(VolumeLocks.Held::close);
        }
    }

    /** A stream on a base: its name, and the ranges that changed since, which the stream's thread asks the engine for. */
    private record Delta(String base, ChangedRanges changed) {}

    @FunctionalInterface
    private interface ChangedRanges {
        List<BlockRange> get() throws IOException, DeviceException, InterruptedException;
    }

    private final NodePools pools;
    private final VolumeLocks locks;
    private final TransferMetrics metrics;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    ContentSender(NodePools pools, VolumeLocks locks, TransferMetrics metrics, Crashes<CrashPoint> crashes, Log log) {
        this.pools = pools;
        this.locks = locks;
        this.metrics = metrics;
        this.crashes = crashes;
        this.log = log;
    }

    /** Checks the request and starts the stream; a request it refuses is answered at once. */
    void send(ReadContentRequest request, ServerCallStreamObserver<ContentChunk> out) {
        Source source;
        try {
            source = open(request);
        } catch (CsiException e) {
            out.onError(e.toStatus().asRuntimeException());
            return;
        } catch (IOException | DeviceException e) {
            out.onError(CsiException.internal(CsiException.describe(e)).toStatus().asRuntimeException());
            return;
        }
        long from = source.tag().equals(request.getTag()) ? request.getOffset() : 0;
        StreamReadiness ready = new StreamReadiness(out, STALL);
        out.setOnCancelHandler(() -> ready.fail(Status.CANCELLED.withDescription("the reader went away")));
        Thread.ofPlatform().daemon(true).name("send-" + source.name()).start(() -> stream(source, from, out, ready));
    }

    private Source open(ReadContentRequest request) throws IOException, DeviceException {
        if (request.getOffset() < 0) {
            throw CsiException.invalidArgument("offset must not be negative, got " + request.getOffset());
        }
        if (!request.getBaseSnapshot().isEmpty()) {
            if (!request.getSource().hasSnapshot()) {
                throw CsiException.invalidArgument("base_snapshot is for a snapshot's content; the source is a volume");
            }
            return delta(request.getSource().getSnapshot(), request.getBaseSnapshot());
        }
        return switch (request.getSource().getKindCase()) {
            case VOLUME -> volume(request.getSource().getVolume());
            case SNAPSHOT -> snapshot(request.getSource().getSnapshot());
            case KIND_NOT_SET -> throw CsiException.missing("source");
        };
    }

    /** A detached volume, held by its lock from here to the stream's end (an attach waits). */
    private Source volume(String name) throws IOException, DeviceException {
        if (name.isEmpty()) {
            throw CsiException.missing("source.volume");
        }
        LocalVolumeId.checkName(name);
        VolumeLocks.Held held = locks.acquire(name);
        try {
            OutgoingContent content = pools.holding(name).outgoing().volume(name);
            return new Source(name, content, content.tag(), Optional.empty(), List.of(held));
        } catch (IOException | DeviceException | RuntimeException e) {
            held.close();
            throw e;
        }
    }

    /** A snapshot, held by its lock from here to the stream's end (a delete waits). */
    private Source snapshot(String name) throws IOException, DeviceException {
        if (name.isEmpty()) {
            throw CsiException.missing("source.snapshot");
        }
        LocalSnapshotId.checkName(name);
        VolumeLocks.Held held = locks.acquire(PoolSnapshots.lockKey(name));
        try {
            OutgoingContent content = pools.holdingSnapshot(name).outgoing().snapshot(name);
            return new Source(name, content, content.tag(), Optional.empty(), List.of(held));
        } catch (IOException | DeviceException | RuntimeException e) {
            held.close();
            throw e;
        }
    }

    /**
     * Snapshot {@code name} on the earlier snapshot {@code base} of the same volume, in the same
     * pool, both held by their locks; the ranges that changed are told on the stream's thread
     * (where the engine reads data to tell, seconds), before its start goes out.
     */
    private Source delta(String name, String base) throws IOException, DeviceException {
        if (name.isEmpty()) {
            throw CsiException.missing("source.snapshot");
        }
        LocalSnapshotId.checkName(name);
        LocalSnapshotId.checkName(base);
        if (base.equals(name)) {
            throw CsiException.invalidArgument("base_snapshot " + base + " is the source itself");
        }
        List<VolumeLocks.Held> held = new ArrayList<>();
        try {
            held.add(locks.acquire(PoolSnapshots.lockKey(name)));
            held.add(locks.acquire(PoolSnapshots.lockKey(base)));
            VolumePool pool = pools.holdingSnapshot(name);
            SnapshotRecord target = pool.snapshots().ready(name);
            SnapshotRecord earlier = pool.snapshots().ready(base);
            RangeSender.requireBase(earlier, target);
            if (!earlier.getOriginNode().equals(target.getOriginNode())) {
                throw CsiException.invalidArgument("snapshots " + base + " and " + name + " were taken on different nodes");
            }
            ChangedRanges changed = () -> {
                List<BlockRange> ranges = new ArrayList<>();
                pool.changedBlocks().changed(earlier, target, 0, ranges::add);
                return ranges;
            };
            OutgoingContent content = pool.outgoing().snapshot(name);
            return new Source(name, content, content.tag() + "/since/" + PoolSnapshots.contentTag(earlier),
                    Optional.of(new Delta(base, changed)), held);
        } catch (IOException | DeviceException | RuntimeException e) {
            held.forEach(VolumeLocks.Held::close);
            throw e;
        }
    }

    private void stream(Source source, long from, ServerCallStreamObserver<ContentChunk> out, StreamReadiness ready) {
        long started = System.nanoTime();
        long[] sent = {0};
        int[] chunks = {0};
        try (source) {
            byte[] digest = send(source, from, out, ready, sent, chunks);
            ready.await();
            out.onNext(ContentChunk.newBuilder().setEnd(ContentEnd.newBuilder().setSha256(ByteString.copyFrom(digest))).build());
            out.onCompleted();
            log.info("content sent", "source", source.name(), "base", source.delta().map(Delta::base).orElse(""), "from", from,
                    "data_bytes", sent[0],
                    "seconds", String.format("%.1f", (System.nanoTime() - started) / 1e9));
        } catch (StatusRuntimeException e) { // the reader went away, or took nothing for too long
            log.warn("content stream ended early", "source", source.name(), "data_bytes", sent[0], "status", e.getStatus().getCode(),
                    "reason", e.getStatus().getDescription());
            fail(out, e.getStatus());
        } catch (CsiException e) {
            fail(out, e.toStatus());
        } catch (IOException | DeviceException e) {
            log.error("cannot read content", "source", source.name(), "error", e.toString());
            fail(out, CsiException.internal("cannot read " + source.name() + ": " + CsiException.describe(e)).toStatus());
        } catch (InterruptedException e) {
            fail(out, Status.ABORTED.withDescription("interrupted"));
        }
    }

    /**
     * The start and the data; returns the digest. The content is closed (a logical volume
     * deactivated) before the end goes out: once the reader has the end, the controller deletes a
     * temporary snapshot, which must find it released.
     */
    private byte[] send(Source source, long from, ServerCallStreamObserver<ContentChunk> out, StreamReadiness ready,
            long[] sent, int[] chunks) throws IOException, DeviceException, InterruptedException {
        OutgoingContent content = source.content();
        try (content) {
            List<BlockRange> changed = source.delta().isPresent() ? source.delta().get().changed().get() : List.of();
            ready.await();
            out.onNext(ContentChunk.newBuilder().setStart(ContentStart.newBuilder()
                    .setTag(source.tag()).setSizeBytes(content.sizeBytes()).setOffset(from)
                    .setFilesystem(content.filesystem()).setUsedAsBlock(content.usedAsBlock())
                    .setEncrypted(content.encrypted()).setBaseSnapshot(source.delta().map(Delta::base).orElse(""))).build());
            DeltaChunks.Out chunkOut = new DeltaChunks.Out() {
                @Override
                public void data(long offset, ByteBuffer data) throws InterruptedException {
                    ready.await();
                    int length = data.remaining();
                    // The read's own buffer, not a copy: on a server stream (ReadContent is one) onNext
                    // serializes the message into the transport's buffers before it returns, and the read
                    // reuses its buffer only after that. A client stream may keep the message for later
                    // (before the transport is ready, or to retry), which would need a copy here.
                    out.onNext(ContentChunk.newBuilder().setData(ContentData.newBuilder()
                            .setOffset(offset).setCrc32C(ImageContent.crc32c(data)).setData(UnsafeByteOperations.unsafeWrap(data))).build());
                    sent[0] += length;
                    metrics.sent(length);
                    if (++chunks[0] == CHUNKS_BEFORE_CRASH_POINT) {
                        crashes.reach(CrashPoint.TRANSFER_SENT);
                    }
                }

                @Override
                public void zero(long offset, long length) throws InterruptedException {
                    ready.await();
                    out.onNext(ContentChunk.newBuilder().setZero(ContentZero.newBuilder().setOffset(offset).setLength(length)).build());
                }
            };
            if (source.delta().isEmpty()) {
                return content.read(from, chunkOut::data);
            }
            DeltaChunks delta = new DeltaChunks(changed, from, content.sizeBytes(), chunkOut);
            byte[] digest = content.read(from, delta);
            delta.finish();
            return digest;
        }
    }

    private static void fail(ServerCallStreamObserver<ContentChunk> out, Status status) {
        if (!out.isCancelled()) {
            try {
                out.onError(status.asRuntimeException());
            } catch (RuntimeException e) {
                // the call ended meanwhile
            }
        }
    }
}
