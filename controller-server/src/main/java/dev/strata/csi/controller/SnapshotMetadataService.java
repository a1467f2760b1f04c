package dev.strata.csi.controller;

import csi.v1.Csi.BlockMetadata;
import csi.v1.Csi.BlockMetadataType;
import csi.v1.Csi.GetMetadataAllocatedRequest;
import csi.v1.Csi.GetMetadataAllocatedResponse;
import csi.v1.Csi.GetMetadataDeltaRequest;
import csi.v1.Csi.GetMetadataDeltaResponse;
import csi.v1.SnapshotMetadataGrpc;
import dev.strata.csi.agent.api.BlockRange;
import dev.strata.csi.agent.api.BlockRangeBatch;
import dev.strata.csi.agent.api.GetAllocatedRangesRequest;
import dev.strata.csi.agent.api.GetChangedRangesRequest;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.nfs.NfsSnapshotId;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.StreamReadiness;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import java.util.function.Function;

/**
 * The CSI SnapshotMetadata service (what external-snapshot-metadata calls for backup tools), for
 * snapshots of the local backend: the node agent that holds the snapshots reads its pool's
 * metadata and streams the ranges (GetAllocatedRanges, GetChangedRanges); this service checks the
 * request, relays the batches as they come, and never reads volume data. Ranges are
 * VARIABLE_LENGTH: an extent or a run of thin chunks is one range however long, so an unchanged
 * volume costs one message and a 1 GiB write one tuple, not 262,144 blocks. A client that cancels
 * cancels the agent's call, which stops the work on the node. An NFS snapshot is a directory tree,
 * not a block volume: INVALID_ARGUMENT.
 */
public final class SnapshotMetadataService extends SnapshotMetadataGrpc.SnapshotMetadataImplBase {

    /** A client that takes nothing for this long is gone. */
    private static final Duration STALL = Duration.ofMinutes(2);

    private final AgentDirectory agents;

    public SnapshotMetadataService(AgentDirectory agents) {
        this.agents = agents;
    }

    @Override
    public void getMetadataAllocated(GetMetadataAllocatedRequest request, StreamObserver<GetMetadataAllocatedResponse> response) {
        ServerCallStreamObserver<GetMetadataAllocatedResponse> out = (ServerCallStreamObserver<GetMetadataAllocatedResponse>) response;
        Iterator<BlockRangeBatch> batches;
        try {
            checkPaging(request.getStartingOffset(), request.getMaxResults());
            LocalSnapshotId snapshot = located("snapshot_id", request.getSnapshotId());
            batches = agents.stub(snapshot.nodeId()).withDeadline(null).getAllocatedRanges(GetAllocatedRangesRequest.newBuilder()
                    .setSnapshot(snapshot.name()).setStartingOffset(request.getStartingOffset()).setMaxResults(request.getMaxResults())
                    .build());
        } catch (CsiException e) {
            out.onError(e.toStatus().asRuntimeException());
            return;
        }
        relay(batches, out, batch -> GetMetadataAllocatedResponse.newBuilder().setBlockMetadataType(BlockMetadataType.VARIABLE_LENGTH)
                .setVolumeCapacityBytes(batch.getCapacityBytes()).addAllBlockMetadata(metadata(batch.getRangesList())).build());
    }

    @Override
    public void getMetadataDelta(GetMetadataDeltaRequest request, StreamObserver<GetMetadataDeltaResponse> response) {
        ServerCallStreamObserver<GetMetadataDeltaResponse> out = (ServerCallStreamObserver<GetMetadataDeltaResponse>) response;
        Iterator<BlockRangeBatch> batches;
        try {
            checkPaging(request.getStartingOffset(), request.getMaxResults());
            LocalSnapshotId base = located("base_snapshot_id", request.getBaseSnapshotId());
            LocalSnapshotId target = located("target_snapshot_id", request.getTargetSnapshotId());
            if (!base.nodeId().equals(target.nodeId())) { // a volume's snapshots are on its node
                throw CsiException.invalidArgument("snapshots " + base + " and " + target + " are of different volumes (on nodes "
                        + base.nodeId() + " and " + target.nodeId() + ")");
            }
            batches = agents.stub(target.nodeId()).withDeadline(null).getChangedRanges(GetChangedRangesRequest.newBuilder()
                    .setBaseSnapshot(base.name()).setTargetSnapshot(target.name()).setStartingOffset(request.getStartingOffset())
                    .setMaxResults(request.getMaxResults()).build());
        } catch (CsiException e) {
            out.onError(e.toStatus().asRuntimeException());
            return;
        }
        relay(batches, out, batch -> GetMetadataDeltaResponse.newBuilder().setBlockMetadataType(BlockMetadataType.VARIABLE_LENGTH)
                .setVolumeCapacityBytes(batch.getCapacityBytes()).addAllBlockMetadata(metadata(batch.getRangesList())).build());
    }

    private static void checkPaging(long startingOffset, int maxResults) {
        if (startingOffset < 0) {
            throw CsiException.invalidArgument("starting_offset must not be negative, got " + startingOffset);
        }
        if (maxResults < 0) {
            throw CsiException.invalidArgument("max_results must not be negative, got " + maxResults);
        }
    }

    /**
     * The snapshot the id names, on a node the index says holds it: NOT_FOUND for an id this
     * driver never handed out or a snapshot that is gone; INVALID_ARGUMENT for an NFS snapshot.
     */
    private LocalSnapshotId located(String field, String id) {
        if (id.isEmpty()) {
            throw CsiException.missing(field);
        }
        if (NfsSnapshotId.parse(id).isPresent()) {
            throw CsiException.invalidArgument(field + " " + CsiException.printable(id) + " is a snapshot of an NFS volume, a directory"
                    + " tree: snapshot metadata is served for the local backend's volumes, which are block devices");
        }
        LocalSnapshotId snapshot = LocalSnapshotId.parse(id).orElseThrow(() ->
                CsiException.notFound("snapshot " + CsiException.printable(id) + " does not exist"));
        boolean indexed = agents.index().snapshots(snapshot.name()).stream().anyMatch(found -> found.nodeId().equals(snapshot.nodeId()));
        if (!indexed) {
            agents.requireReported(snapshot.nodeId(), "whether snapshot " + id + " exists");
            throw CsiException.notFound("snapshot " + id + " does not exist");
        }
        return snapshot;
    }

    private static List<BlockMetadata> metadata(List<BlockRange> ranges) {
        return ranges.stream().map(range -> BlockMetadata.newBuilder().setByteOffset(range.getOffset()).setSizeBytes(range.getLength())
                .build()).toList();
    }

    /**
     * Relays the agent's batches on a thread of its own (onReady reaches a handler only once it has
     * returned), one at a time as the client takes them. The agent's call runs in this call's
     * context: a client that cancels cancels it.
     */
    private static <T> void relay(Iterator<BlockRangeBatch> batches, ServerCallStreamObserver<T> out, Function<BlockRangeBatch, T> reply) {
        StreamReadiness ready = new StreamReadiness(out, STALL);
        out.setOnCancelHandler(() -> ready.fail(Status.CANCELLED.withDescription("the client went away")));
        Context context = Context.current();
        Thread.ofPlatform().daemon(true).name("snapshot-metadata").start(context.wrap(() -> {
            try {
                while (batches.hasNext()) {
                    T message = reply.apply(batches.next());
                    ready.await();
                    out.onNext(message);
                }
                out.onCompleted();
            } catch (StatusRuntimeException e) { // the agent's status (NOT_FOUND, OUT_OF_RANGE...), or the client went away
                fail(out, e.getStatus());
            } catch (InterruptedException e) {
                fail(out, Status.ABORTED.withDescription("interrupted; retry"));
            }
        }));
    }

    private static void fail(ServerCallStreamObserver<?> out, Status status) {
        if (!out.isCancelled()) {
            try {
                out.onError(status.asRuntimeException());
            } catch (RuntimeException e) {
                // the call ended meanwhile
            }
        }
    }
}
