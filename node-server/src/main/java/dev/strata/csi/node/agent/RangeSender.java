package dev.strata.csi.node.agent;

import dev.strata.csi.agent.api.BlockRange;
import dev.strata.csi.agent.api.BlockRangeBatch;
import dev.strata.csi.agent.api.GetAllocatedRangesRequest;
import dev.strata.csi.agent.api.GetChangedRangesRequest;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.ChangedBlocks;
import dev.strata.csi.node.local.blocks.RangeSink;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.PoolSnapshots;
import dev.strata.csi.node.local.pool.VolumePool;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.StreamReadiness;
import dev.strata.csi.rpc.VolumeLocks;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

/**
 * GetAllocatedRanges and GetChangedRanges: the request checked, the snapshots held by their locks
 * (against deletion) for as long as the stream runs, and the pool's {@link ChangedBlocks} engine's
 * ranges streamed in batches on a thread of its own, never more than the transport's window ahead
 * of the reader. A reader that cancels, or takes nothing for {@link #STALL}, stops the engine at its
 * next range or read.
 */
final class RangeSender {

    static final Duration STALL = Duration.ofMinutes(2);
    /** Ranges per batch when the caller leaves it to the agent. */
    static final int DEFAULT_BATCH = 1024;

    /** One engine run: what it needs once the request is checked. */
    private interface Scan {
        void run(ChangedBlocks engine, RangeSink sink) throws IOException, DeviceException, InterruptedException;
    }

    private final NodePools pools;
    private final VolumeLocks locks;
    private final Log log;

    RangeSender(NodePools pools, VolumeLocks locks, Log log) {
        this.pools = pools;
        this.locks = locks;
        this.log = log;
    }

    void allocated(GetAllocatedRangesRequest request, ServerCallStreamObserver<BlockRangeBatch> out) {
        start(List.of("snapshot"), List.of(request.getSnapshot()), request.getStartingOffset(), request.getMaxResults(), out, () -> {
            SnapshotRecord snapshot = pools.holdingSnapshot(request.getSnapshot()).snapshots().ready(request.getSnapshot());
            long from = inRange(request.getStartingOffset(), snapshot);
            return new Prepared(snapshot.getCapacityBytes(), (engine, sink) -> engine.allocated(snapshot, from, sink));
        });
    }

    void changed(GetChangedRangesRequest request, ServerCallStreamObserver<BlockRangeBatch> out) {
        start(List.of("base_snapshot", "target_snapshot"), List.of(request.getBaseSnapshot(), request.getTargetSnapshot()),
                request.getStartingOffset(), request.getMaxResults(), out,
                () -> {
                    SnapshotRecord target = pools.holdingSnapshot(request.getTargetSnapshot()).snapshots().ready(request.getTargetSnapshot());
                    SnapshotRecord base = pools.holdingSnapshot(request.getBaseSnapshot()).snapshots().ready(request.getBaseSnapshot());
                    requireBase(base, target);
                    long from = inRange(request.getStartingOffset(), target);
                    return new Prepared(target.getCapacityBytes(), (engine, sink) -> engine.changed(base, target, from, sink));
                });
    }

    /** INVALID_ARGUMENT unless {@code base} is a snapshot of {@code target}'s volume taken no later. */
    static void requireBase(SnapshotRecord base, SnapshotRecord target) {
        if (!base.getSourceVolume().equals(target.getSourceVolume())) {
            throw CsiException.invalidArgument("snapshots " + base.getName() + " and " + target.getName()
                    + " are of different volumes (" + base.getSourceVolume() + ", " + target.getSourceVolume() + ")");
        }
        if (taken(base).isAfter(taken(target))) {
            throw CsiException.invalidArgument("base snapshot " + base.getName() + " was taken after target snapshot "
                    + target.getName());
        }
    }

    private record Prepared(long capacityBytes, Scan scan) {}

    private interface Preparation {
        Prepared prepare() throws IOException, DeviceException;
    }

    private static Instant taken(SnapshotRecord snapshot) {
        return Instant.ofEpochSecond(snapshot.getCreationTime().getSeconds(), snapshot.getCreationTime().getNanos());
    }

    private static long inRange(long from, SnapshotRecord snapshot) {
        if (from >= snapshot.getCapacityBytes()) {
            throw CsiException.outOfRange("starting_offset " + from + " is at or past the end of snapshot " + snapshot.getName()
                    + " (" + snapshot.getCapacityBytes() + " bytes)");
        }
        return from;
    }

    /** {@code names}: the snapshots, in the request's {@code fields}; the last is the one whose ranges are sent. */
    private void start(List<String> fields, List<String> names, long from, int maxResults, ServerCallStreamObserver<BlockRangeBatch> out,
            Preparation preparation) {
        List<VolumeLocks.Held> held = new ArrayList<>();
        Prepared prepared;
        VolumePool pool;
        try {
            for (int i = 0; i < names.size(); i++) {
                if (names.get(i).isEmpty()) {
                    throw CsiException.missing(fields.get(i));
                }
                LocalSnapshotId.checkName(names.get(i));
            }
            if (from < 0) {
                throw CsiException.invalidArgument("starting_offset must not be negative, got " + from);
            }
            if (maxResults < 0) {
                throw CsiException.invalidArgument("max_results must not be negative, got " + maxResults);
            }
            for (String name : new TreeSet<>(names)) { // in name order: two streams never wait on each other
                held.add(locks.acquire(PoolSnapshots.lockKey(name)));
            }
            pool = pools.holdingSnapshot(names.getLast()); // the target's: a snapshot of the same volume is in the same pool
            prepared = preparation.prepare();
        } catch (CsiException e) {
            release(held);
            out.onError(e.toStatus().asRuntimeException());
            return;
        } catch (IOException | DeviceException e) {
            release(held);
            out.onError(CsiException.internal(CsiException.describe(e)).toStatus().asRuntimeException());
            return;
        } catch (RuntimeException e) { // a bug: the call log records it
            release(held);
            throw e;
        }
        StreamReadiness ready = new StreamReadiness(out, STALL);
        out.setOnCancelHandler(() -> ready.fail(Status.CANCELLED.withDescription("the reader went away")));
        int batch = maxResults == 0 ? DEFAULT_BATCH : maxResults;
        Thread.ofPlatform().daemon(true).name("ranges-" + names.getLast()).start(() -> {
            try {
                stream(pool.changedBlocks(), prepared, batch, names, out, ready);
            } finally {
                release(held);
            }
        });
    }

    private void stream(ChangedBlocks engine, Prepared prepared, int batchSize, List<String> names,
            ServerCallStreamObserver<BlockRangeBatch> out, StreamReadiness ready) {
        long started = System.nanoTime();
        Batches batches = new Batches(prepared.capacityBytes(), batchSize, out, ready);
        try {
            prepared.scan().run(engine, batches);
            batches.finish();
            out.onCompleted();
            log.info("snapshot ranges sent", "snapshots", names, "ranges", batches.ranges, "range_bytes", batches.rangeBytes,
                    "bytes_read", batches.bytesRead, "seconds", String.format("%.2f", (System.nanoTime() - started) / 1e9));
        } catch (StatusRuntimeException e) { // the reader went away, or took nothing for too long
            log.warn("snapshot ranges stream ended early", "snapshots", names, "status", e.getStatus().getCode());
            fail(out, e.getStatus());
        } catch (CsiException e) {
            fail(out, e.toStatus());
        } catch (IOException | DeviceException e) {
            log.error("cannot read snapshot ranges", "snapshots", names, "error", e.toString());
            fail(out, CsiException.internal("cannot read the ranges of " + names + ": " + CsiException.describe(e)).toStatus());
        } catch (InterruptedException e) {
            fail(out, Status.ABORTED.withDescription("interrupted"));
        }
    }

    /** The sink: ranges gathered into batches of at most {@code size}, each sent once full. */
    private static final class Batches implements RangeSink {
        private final long capacity;
        private final int size;
        private final ServerCallStreamObserver<BlockRangeBatch> out;
        private final StreamReadiness ready;
        private BlockRangeBatch.Builder batch;
        private boolean sent;
        long ranges;
        long rangeBytes;
        long bytesRead;

        Batches(long capacity, int size, ServerCallStreamObserver<BlockRangeBatch> out, StreamReadiness ready) {
            this.capacity = capacity;
            this.size = size;
            this.out = out;
            this.ready = ready;
            this.batch = BlockRangeBatch.newBuilder().setCapacityBytes(capacity);
        }

        @Override
        public void accept(dev.strata.csi.node.local.blocks.BlockRange range) throws InterruptedException {
            batch.addRanges(BlockRange.newBuilder().setOffset(range.offset()).setLength(range.length()));
            ranges++;
            rangeBytes += range.length();
            if (batch.getRangesCount() >= size) {
                send();
            }
        }

        @Override
        public void read(long bytes) {
            bytesRead += bytes;
            batch.setBytesRead(batch.getBytesRead() + bytes);
            if (out.isCancelled()) {
                throw Status.CANCELLED.withDescription("the reader went away").asRuntimeException();
            }
        }

        /** The last batch; an empty one when none was sent, so that the reader learns the capacity. */
        void finish() throws InterruptedException {
            if (batch.getRangesCount() > 0 || !sent) {
                send();
            }
        }

        private void send() throws InterruptedException {
            ready.await();
            out.onNext(batch.build());
            sent = true;
            batch = BlockRangeBatch.newBuilder().setCapacityBytes(capacity);
        }
    }

    private static void release(List<VolumeLocks.Held> held) {
        held.forEach(VolumeLocks.Held::close);
    }

    private static void fail(ServerCallStreamObserver<BlockRangeBatch> out, Status status) {
        if (!out.isCancelled()) {
            try {
                out.onError(status.asRuntimeException());
            } catch (RuntimeException e) {
                // the call ended meanwhile
            }
        }
    }
}
