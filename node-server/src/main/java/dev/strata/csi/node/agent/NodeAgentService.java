package dev.strata.csi.node.agent;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.AttachImageRequest;
import dev.strata.csi.agent.api.AttachImageResponse;
import dev.strata.csi.agent.api.BlockRangeBatch;
import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.CreateImageRequest;
import dev.strata.csi.agent.api.CreateImageResponse;
import dev.strata.csi.agent.api.CreateSnapshotRequest;
import dev.strata.csi.agent.api.CreateSnapshotResponse;
import dev.strata.csi.agent.api.DeleteImageRequest;
import dev.strata.csi.agent.api.DeleteImageResponse;
import dev.strata.csi.agent.api.DeleteSnapshotRequest;
import dev.strata.csi.agent.api.DeleteSnapshotResponse;
import dev.strata.csi.agent.api.DetachImageRequest;
import dev.strata.csi.agent.api.DetachImageResponse;
import dev.strata.csi.agent.api.ExpandImageRequest;
import dev.strata.csi.agent.api.ExpandImageResponse;
import dev.strata.csi.agent.api.GetAllocatedRangesRequest;
import dev.strata.csi.agent.api.GetChangedRangesRequest;
import dev.strata.csi.agent.api.GetImageRequest;
import dev.strata.csi.agent.api.GetImageResponse;
import dev.strata.csi.agent.api.ListImagesRequest;
import dev.strata.csi.agent.api.ListImagesResponse;
import dev.strata.csi.agent.api.ListSnapshotsRequest;
import dev.strata.csi.agent.api.ListSnapshotsResponse;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.ProbeRequest;
import dev.strata.csi.agent.api.ProbeResponse;
import dev.strata.csi.agent.api.ReadContentRequest;
import dev.strata.csi.agent.api.ReceiveImageRequest;
import dev.strata.csi.agent.api.ReceiveImageResponse;
import dev.strata.csi.agent.api.SetIoLimitsRequest;
import dev.strata.csi.agent.api.SetIoLimitsResponse;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.agent.api.WriteContentResponse;
import dev.strata.csi.backend.local.SnapshotId;
import dev.strata.csi.backend.local.VolumeId;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.VolumeIoLimits;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.PoolSnapshots;
import dev.strata.csi.node.local.pool.VolumePool;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.system.Crashes;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.Optional;

/**
 * The node agent's API for controller-server: the pools' operations, one at a time per image and
 * per snapshot. A new volume goes into the pool its request names; every other call goes to the
 * pool that holds the name ({@link NodePools}). A copy locks its source too (the image, or the snapshot): a source image is not staged
 * or unstaged while its filesystem is frozen, a snapshot not deleted while restored from.
 */
public final class NodeAgentService extends NodeAgentGrpc.NodeAgentImplBase {

    private final NodePools pools;
    private final VolumeLocks locks;
    private final ContentSender sender;
    private final ContentReceiver receiver;
    private final RangeSender ranges;
    private final Inventory inventory;
    private final VolumeIoLimits ioLimits;

    /**
     * {@code locks} is shared with the Node service: a volume is never staged while it is detached.
     * Every change is counted in {@code inventory} under the name's lock, and the generation that
     * includes it is in the reply, so the controller can tell a report made before it from one after.
     */
    public NodeAgentService(NodePools pools, VolumeLocks locks, Inventory inventory, VolumeIoLimits ioLimits,
            PrometheusRegistry metrics, Crashes<CrashPoint> crashes, Log log) {
        this.pools = pools;
        this.locks = locks;
        this.inventory = inventory;
        this.ioLimits = ioLimits;
        TransferMetrics transfers = new TransferMetrics(metrics);
        this.sender = new ContentSender(pools, locks, transfers, crashes, log);
        this.receiver = new ContentReceiver(pools, locks, inventory, transfers, crashes, log);
        this.ranges = new RangeSender(pools, locks, log);
    }

    @Override
    public void createImage(CreateImageRequest request, StreamObserver<CreateImageResponse> response) {
        Rpc.answer(response, () -> {
            checkNewImage(request.getCapacityBytes(), request.getAllocation(), request.getAllocationValue());
            Optional<ContentSource> source = request.hasSource() ? Optional.of(request.getSource()) : Optional.empty();
            try (var held = locks.acquire(name(request.getName()));
                    var sourceHeld = source.isPresent() ? locks.acquire(sourceLockKey(source.get())) : null) { // null: nothing to close
                try {
                    VolumePool pool = pools.forNew(request.getName(), request.getPool());
                    if (source.isPresent()) {
                        requireSamePool(pool, source.get());
                    }
                    return CreateImageResponse.newBuilder()
                            .setImage(pool.create(request.getName(), request.getCapacityBytes(), request.getAllocation(), source,
                                    request.getEncrypted(), request.getThinOvercommitRatio()))
                            .setGeneration(inventory.imageChanged(request.getName()))
                            .build();
                } catch (Exception e) {
                    inventory.imageChanged(request.getName()); // a create cut short may have left or removed something
                    throw e;
                }
            }
        });
    }

    @Override
    public void deleteImage(DeleteImageRequest request, StreamObserver<DeleteImageResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                try {
                    pools.holding(request.getName()).delete(request.getName());
                } finally {
                    inventory.imageChanged(request.getName());
                }
                return DeleteImageResponse.newBuilder().setGeneration(inventory.generation()).build();
            }
        });
    }

    @Override
    public void attachImage(AttachImageRequest request, StreamObserver<AttachImageResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                try {
                    return AttachImageResponse.newBuilder().setImage(pools.holding(request.getName()).attach(request.getName(), request.getNodeId())).build();
                } finally {
                    inventory.imageChanged(request.getName()); // its published nodes, for ListVolumes
                }
            }
        });
    }

    @Override
    public void detachImage(DetachImageRequest request, StreamObserver<DetachImageResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                try {
                    pools.holding(request.getName()).detach(request.getName(), request.getNodeId());
                } finally {
                    inventory.imageChanged(request.getName());
                }
                return DetachImageResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void expandImage(ExpandImageRequest request, StreamObserver<ExpandImageResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getCapacityBytes() <= 0) {
                throw CsiException.invalidArgument("capacity_bytes must be positive");
            }
            try (var held = locks.acquire(name(request.getName()))) {
                try {
                    return ExpandImageResponse.newBuilder().setImage(pools.holding(request.getName()).expand(request.getName(), request.getCapacityBytes())).build();
                } finally {
                    inventory.imageChanged(request.getName());
                }
            }
        });
    }

    @Override
    public void getImage(GetImageRequest request, StreamObserver<GetImageResponse> response) {
        Rpc.answer(response, () -> {
            // Taking the lock: an image being created or deleted is neither there nor gone yet.
            try (var held = locks.acquire(name(request.getName()))) {
                return GetImageResponse.newBuilder()
                        .setImage(pools.get(request.getName()).orElseThrow(() ->
                                CsiException.notFound("volume " + request.getName() + " does not exist on this node")))
                        .build();
            }
        });
    }

    @Override
    public void listImages(ListImagesRequest request, StreamObserver<ListImagesResponse> response) {
        Rpc.answer(response, () -> ListImagesResponse.newBuilder()
                .addAllImages(pools.list())
                .setPool(pools.imageStatus())
                .addAllPools(pools.statuses())
                .build());
    }

    @Override
    public void createSnapshot(CreateSnapshotRequest request, StreamObserver<CreateSnapshotResponse> response) {
        Rpc.answer(response, () -> {
            try (var source = locks.acquire(name(request.getSourceImage()));
                    var held = locks.acquire(snapshotName(request.getName()))) {
                try {
                    var taken = pools.forNewSnapshot(request.getName(), request.getSourceImage()).snapshots()
                            .take(request.getName(), request.getSourceImage(), request.getTemporary());
                    return CreateSnapshotResponse.newBuilder().setSnapshot(taken)
                            .setGeneration(inventory.snapshotChanged(request.getName())).build();
                } catch (Exception e) {
                    inventory.snapshotChanged(request.getName());
                    throw e;
                }
            }
        });
    }

    @Override
    public void deleteSnapshot(DeleteSnapshotRequest request, StreamObserver<DeleteSnapshotResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(snapshotName(request.getName()))) {
                try {
                    pools.holdingSnapshot(request.getName()).snapshots().delete(request.getName());
                } finally {
                    inventory.snapshotChanged(request.getName());
                }
                return DeleteSnapshotResponse.newBuilder().setGeneration(inventory.generation()).build();
            }
        });
    }

    @Override
    public void listSnapshots(ListSnapshotsRequest request, StreamObserver<ListSnapshotsResponse> response) {
        Rpc.answer(response, () -> ListSnapshotsResponse.newBuilder().addAllSnapshots(pools.snapshots()).build());
    }

    @Override
    public void readContent(ReadContentRequest request, StreamObserver<ContentChunk> response) {
        sender.send(request, (ServerCallStreamObserver<ContentChunk>) response);
    }

    @Override
    public void receiveImage(ReceiveImageRequest request, StreamObserver<ReceiveImageResponse> response) {
        Rpc.answer(response, () -> {
            checkNewImage(request.getCapacityBytes(), request.getAllocation(), request.getAllocationValue());
            try (var held = locks.acquire(name(request.getName()))) {
                if (!request.hasSource()) {
                    throw CsiException.missing("source");
                }
                ImageRecord record = pools.forNew(request.getName(), request.getPool()).incoming().receive(request.getName(),
                        request.getCapacityBytes(), request.getAllocation(), request.getSource(), request.getEncrypted(),
                        request.getThinOvercommitRatio());
                var reply = ReceiveImageResponse.newBuilder().setTag(record.getReceiveTag()).setReceivedBytes(record.getReceivedBytes());
                if (record.getState() == ImageRecord.State.READY) {
                    pools.get(request.getName()).ifPresent(reply::setImage);
                }
                return reply.build();
            }
        });
    }

    @Override
    public StreamObserver<WriteContentRequest> writeContent(StreamObserver<WriteContentResponse> response) {
        return receiver.receive((ServerCallStreamObserver<WriteContentResponse>) response);
    }

    @Override
    public void getAllocatedRanges(GetAllocatedRangesRequest request, StreamObserver<BlockRangeBatch> response) {
        ranges.allocated(request, (ServerCallStreamObserver<BlockRangeBatch>) response);
    }

    @Override
    public void getChangedRanges(GetChangedRangesRequest request, StreamObserver<BlockRangeBatch> response) {
        ranges.changed(request, (ServerCallStreamObserver<BlockRangeBatch>) response);
    }

    /** Answers without touching the pool or its locks: it tells a live agent that is busy from one that is stopped. */
    @Override
    public void probe(ProbeRequest request, StreamObserver<ProbeResponse> response) {
        Rpc.answer(response, ProbeResponse::getDefaultInstance);
    }

    @Override
    public void setIoLimits(SetIoLimitsRequest request, StreamObserver<SetIoLimitsResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                try {
                    return SetIoLimitsResponse.newBuilder().setImage(ioLimits.set(request.getName(), request.getIoLimits())).build();
                } finally {
                    inventory.imageChanged(request.getName()); // the limits are in the image the controller lists
                }
            }
        });
    }

    /**
     * INVALID_ARGUMENT when the restore's or clone's source is in another of the node's pools than
     * the new volume; a source no pool has is the pool's to answer (NOT_FOUND).
     */
    private void requireSamePool(VolumePool pool, ContentSource source) throws java.io.IOException {
        VolumePool holding = switch (source.getKindCase()) {
            case SNAPSHOT -> pools.findSnapshot(source.getSnapshot()).orElse(pool);
            case IMAGE -> pools.find(source.getImage()).orElse(pool);
            case KIND_NOT_SET -> pool;
        };
        if (holding != pool) {
            throw CsiException.invalidArgument("the source of the new volume is in this node's " + NodePools.describe(holding.kind())
                    + ", the new volume is to be in its " + NodePools.describe(pool.kind()) + "; a restore or clone stays in its pool");
        }
    }

    /** The lock of a copy's source: the image's name, or the snapshot's key. */
    private static String sourceLockKey(ContentSource source) {
        return switch (source.getKindCase()) {
            case SNAPSHOT -> snapshotName(source.getSnapshot());
            case IMAGE -> name(source.getImage());
            case KIND_NOT_SET -> throw CsiException.invalidArgument("source names neither a snapshot nor an image");
        };
    }

    /** The snapshot's lock key, once the name is checked. */
    private static String snapshotName(String name) {
        if (name.isEmpty()) {
            throw CsiException.missing("name");
        }
        SnapshotId.checkName(name);
        return PoolSnapshots.lockKey(name);
    }

    private static void checkNewImage(long capacityBytes, Allocation allocation, int allocationValue) {
        if (capacityBytes <= 0) {
            throw CsiException.invalidArgument("capacity_bytes must be positive");
        }
        if (allocation != Allocation.SPARSE && allocation != Allocation.FULL) {
            throw CsiException.invalidArgument("allocation must be SPARSE or FULL, got " + allocationValue);
        }
    }

    private static String name(String name) {
        if (name.isEmpty()) {
            throw CsiException.missing("name");
        }
        VolumeId.checkName(name);
        return name;
    }
}
