package dev.strata.csi.node.agent;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.AttachVolumeRequest;
import dev.strata.csi.agent.api.AttachVolumeResponse;
import dev.strata.csi.agent.api.CommitVolumeGroupRequest;
import dev.strata.csi.agent.api.CommitVolumeGroupResponse;
import dev.strata.csi.agent.api.BlockRangeBatch;
import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.CreateVolumeRequest;
import dev.strata.csi.agent.api.CreateVolumeResponse;
import dev.strata.csi.agent.api.CreateSnapshotRequest;
import dev.strata.csi.agent.api.CreateSnapshotResponse;
import dev.strata.csi.agent.api.DeleteVolumeRequest;
import dev.strata.csi.agent.api.DeleteVolumeResponse;
import dev.strata.csi.agent.api.DeleteSnapshotRequest;
import dev.strata.csi.agent.api.SnapshotTombstone;
import dev.strata.csi.agent.api.DeleteSnapshotResponse;
import dev.strata.csi.agent.api.DetachVolumeRequest;
import dev.strata.csi.agent.api.DetachVolumeResponse;
import dev.strata.csi.agent.api.ExpandVolumeRequest;
import dev.strata.csi.agent.api.ExpandVolumeResponse;
import dev.strata.csi.agent.api.GetAllocatedRangesRequest;
import dev.strata.csi.agent.api.GetChangedRangesRequest;
import dev.strata.csi.agent.api.GetVolumeRequest;
import dev.strata.csi.agent.api.GetVolumeResponse;
import dev.strata.csi.agent.api.ListVolumesRequest;
import dev.strata.csi.agent.api.ListVolumesResponse;
import dev.strata.csi.agent.api.ListSnapshotsRequest;
import dev.strata.csi.agent.api.ListSnapshotsResponse;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.ProbeRequest;
import dev.strata.csi.agent.api.ProbeResponse;
import dev.strata.csi.agent.api.ReadContentRequest;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyRequest;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyResponse;
import dev.strata.csi.agent.api.ReceiveVolumeRequest;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.WriteSnapshotCopyResponse;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.agent.api.ReceiveVolumeResponse;
import dev.strata.csi.agent.api.SetIoLimitsRequest;
import dev.strata.csi.agent.api.SetIoLimitsResponse;
import dev.strata.csi.agent.api.VolumeGroupCutRequest;
import dev.strata.csi.agent.api.VolumeGroupCutResponse;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.agent.api.WriteContentResponse;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.LocalVolumeId;
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
 * The node agent's API for controller-server: the pools' operations, one at a time per volume and
 * per snapshot. A new volume goes into the pool its request names; every other call goes to the
 * pool that holds the name ({@link NodePools}). A copy locks its source too (the volume, or the snapshot): a source volume is not staged
 * or unstaged while its filesystem is frozen, a snapshot not deleted while restored from.
 */
public final class NodeAgentService extends NodeAgentGrpc.NodeAgentImplBase {

    private final NodePools pools;
    private final VolumeLocks locks;
    private final ContentSender sender;
    private final ContentReceiver receiver;
    private final RangeSender ranges;
    private final Inventory inventory;
    private final SnapshotTombstones tombstones;
    private final VolumeIoLimits ioLimits;
    private final VolumeGroupCuts groupCuts;

    /**
     * {@code locks} is shared with the Node service: a volume is never staged while it is detached.
     * Every change is counted in {@code inventory} under the name's lock, and the generation that
     * includes it is in the reply, so the controller can tell a report made before it from one after.
     */
    public NodeAgentService(NodePools pools, VolumeLocks locks, Inventory inventory, SnapshotTombstones tombstones,
            VolumeIoLimits ioLimits, PrometheusRegistry metrics, Crashes<CrashPoint> crashes, Log log) {
        this.pools = pools;
        this.locks = locks;
        this.inventory = inventory;
        this.tombstones = tombstones;
        this.ioLimits = ioLimits;
        TransferMetrics transfers = new TransferMetrics(metrics);
        this.sender = new ContentSender(pools, locks, transfers, crashes, log);
        this.receiver = new ContentReceiver(locks, transfers, crashes, log);
        this.groupCuts = new VolumeGroupCuts(pools, locks, inventory, metrics, crashes, log);
        this.ranges = new RangeSender(pools, locks, log);
    }

    @Override
    public void createVolume(CreateVolumeRequest request, StreamObserver<CreateVolumeResponse> response) {
        Rpc.answer(response, () -> {
            checkNewVolume(request.getCapacityBytes(), request.getPool(), request.getAllocation(), request.getLvType());
            Optional<ContentSource> source = request.hasSource() ? Optional.of(request.getSource()) : Optional.empty();
            try (var held = locks.acquire(name(request.getName()));
                    var sourceHeld = source.isPresent() ? locks.acquire(sourceLockKey(source.get())) : null) { // null: nothing to close
                try {
                    VolumePool pool = pools.forNew(request.getName(), request.getPool());
                    if (source.isPresent()) {
                        requireSamePool(pool, source.get());
                    }
                    return CreateVolumeResponse.newBuilder()
                            .setVolume(pool.create(request.getName(), request.getCapacityBytes(), request.getAllocation(), request.getLvType(),
                                    source, request.getEncrypted(), request.getThinOvercommitRatio()))
                            .setGeneration(inventory.volumeChanged(request.getName()))
                            .build();
                } catch (Exception e) {
                    inventory.volumeChanged(request.getName()); // a create cut short may have left or removed something
                    throw e;
                }
            }
        });
    }

    @Override
    public void deleteVolume(DeleteVolumeRequest request, StreamObserver<DeleteVolumeResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                try {
                    pools.holding(request.getName()).delete(request.getName());
                } finally {
                    inventory.volumeChanged(request.getName());
                }
                return DeleteVolumeResponse.newBuilder().setGeneration(inventory.generation()).build();
            }
        });
    }

    @Override
    public void attachVolume(AttachVolumeRequest request, StreamObserver<AttachVolumeResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                try {
                    return AttachVolumeResponse.newBuilder().setVolume(pools.holding(request.getName()).attach(request.getName(), request.getNodeId())).build();
                } finally {
                    inventory.volumeChanged(request.getName()); // its published nodes, for ListVolumes
                }
            }
        });
    }

    @Override
    public void detachVolume(DetachVolumeRequest request, StreamObserver<DetachVolumeResponse> response) {
        Rpc.answer(response, () -> {
            try (var held = locks.acquire(name(request.getName()))) {
                try {
                    pools.holding(request.getName()).detach(request.getName(), request.getNodeId());
                } finally {
                    inventory.volumeChanged(request.getName());
                }
                return DetachVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void expandVolume(ExpandVolumeRequest request, StreamObserver<ExpandVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getCapacityBytes() <= 0) {
                throw CsiException.invalidArgument("capacity_bytes must be positive");
            }
            try (var held = locks.acquire(name(request.getName()))) {
                try {
                    return ExpandVolumeResponse.newBuilder().setVolume(pools.holding(request.getName()).expand(request.getName(), request.getCapacityBytes())).build();
                } finally {
                    inventory.volumeChanged(request.getName());
                }
            }
        });
    }

    @Override
    public void getVolume(GetVolumeRequest request, StreamObserver<GetVolumeResponse> response) {
        Rpc.answer(response, () -> {
            // Taking the lock: a volume being created or deleted is neither there nor gone yet.
            try (var held = locks.acquire(name(request.getName()))) {
                return GetVolumeResponse.newBuilder()
                        .setVolume(pools.get(request.getName()).orElseThrow(() ->
                                CsiException.notFound("volume " + request.getName() + " does not exist on this node")))
                        .build();
            }
        });
    }

    @Override
    public void listVolumes(ListVolumesRequest request, StreamObserver<ListVolumesResponse> response) {
        Rpc.answer(response, () -> ListVolumesResponse.newBuilder()
                .addAllVolumes(pools.list())
                .setPool(pools.imageStatus())
                .addAllPools(pools.statuses())
                .build());
    }

    @Override
    public void createSnapshot(CreateSnapshotRequest request, StreamObserver<CreateSnapshotResponse> response) {
        Rpc.answer(response, () -> {
            try (var source = locks.acquire(name(request.getSourceVolume()));
                    var held = locks.acquire(snapshotName(request.getName()))) {
                try {
                    var taken = pools.forNewSnapshot(request.getName(), request.getSourceVolume()).snapshots()
                            .take(request.getName(), request.getSourceVolume(), request.getTemporary(), request.getCopyNodesList());
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
                    // After the snapshot: a tombstone is kept only once what it stands for is gone here.
                    tombstones.put(SnapshotTombstone.newBuilder().setName(request.getName())
                            .setOriginNode(request.getOriginNode()).addAllNodes(request.getTombstoneNodesList()).build());
                } finally {
                    inventory.snapshotAndTombstoneChanged(request.getName());
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
    public void receiveVolume(ReceiveVolumeRequest request, StreamObserver<ReceiveVolumeResponse> response) {
        Rpc.answer(response, () -> {
            checkNewVolume(request.getCapacityBytes(), request.getPool(), request.getAllocation(), request.getLvType());
            try (var held = locks.acquire(name(request.getName()))) {
                if (!request.hasSource()) {
                    throw CsiException.missing("source");
                }
                ImageRecord record = pools.forNew(request.getName(), request.getPool()).incoming().receive(request.getName(),
                        request.getCapacityBytes(), request.getAllocation(), request.getLvType(), request.getSource(), request.getEncrypted(),
                        request.getThinOvercommitRatio());
                var reply = ReceiveVolumeResponse.newBuilder().setTag(record.getReceiveTag()).setReceivedBytes(record.getReceivedBytes());
                if (record.getState() == ImageRecord.State.READY) {
                    pools.get(request.getName()).ifPresent(reply::setVolume);
                }
                return reply.build();
            }
        });
    }

    @Override
    public StreamObserver<WriteContentRequest> writeContent(StreamObserver<WriteContentResponse> response) {
        return receiver.receive((ServerCallStreamObserver<WriteContentResponse>) response, ReceiveDestinations.volumes(pools, inventory));
    }

    /**
     * A copy of another node's snapshot, in the pool the request names: made RECEIVING, or found
     * with its base and progress, or complete ({@link dev.strata.csi.node.local.pool.SnapshotCopies#receive}).
     */
    @Override
    public void receiveSnapshotCopy(ReceiveSnapshotCopyRequest request, StreamObserver<ReceiveSnapshotCopyResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getOriginNode().isEmpty()) {
                throw CsiException.missing("origin_node");
            }
            if (!request.hasSnapshot() || request.getSnapshot().getSourceVolume().isEmpty() || request.getSnapshot().getCapacityBytes() <= 0
                    || !request.getSnapshot().hasCreationTime()) {
                throw CsiException.invalidArgument("snapshot must say its source volume, capacity and creation time, as its node reports it");
            }
            try (var held = locks.acquire(snapshotName(request.getName()))) {
                Snapshot snapshot = request.getSnapshot().toBuilder().setName(request.getName()).build();
                SnapshotRecord record = pools.forSnapshotCopy(request.getName(), request.getPool()).snapshotCopies()
                        .receive(request.getName(), request.getOriginNode(), snapshot, request.getBaseSnapshot());
                var reply = ReceiveSnapshotCopyResponse.newBuilder().setBaseSnapshot(record.getBaseSnapshot())
                        .setTag(record.getReceiveTag()).setReceivedBytes(record.getReceivedBytes());
                if (record.getState() == SnapshotRecord.State.READY) {
                    reply.setSnapshot(PoolSnapshots.snapshot(record));
                }
                return reply.build();
            }
        });
    }

    @Override
    public StreamObserver<WriteContentRequest> writeSnapshotCopy(StreamObserver<WriteSnapshotCopyResponse> response) {
        return receiver.receive((ServerCallStreamObserver<WriteSnapshotCopyResponse>) response, ReceiveDestinations.snapshotCopies(pools, inventory));
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
                    return SetIoLimitsResponse.newBuilder().setVolume(ioLimits.set(request.getName(), request.getIoLimits())).build();
                } finally {
                    inventory.volumeChanged(request.getName()); // the limits are in the volume the controller lists
                }
            }
        });
    }

    @Override
    public StreamObserver<VolumeGroupCutRequest> cutVolumeGroup(StreamObserver<VolumeGroupCutResponse> response) {
        return groupCuts.cut((ServerCallStreamObserver<VolumeGroupCutResponse>) response);
    }

    @Override
    public void commitVolumeGroup(CommitVolumeGroupRequest request, StreamObserver<CommitVolumeGroupResponse> response) {
        Rpc.answer(response, () -> CommitVolumeGroupResponse.newBuilder()
                .addAllSnapshots(groupCuts.commit(request.getName()))
                .setGeneration(inventory.generation())
                .build());
    }

    /**
     * INVALID_ARGUMENT when the restore's or clone's source is in another of the node's pools than
     * the new volume; a source no pool has is the pool's to answer (NOT_FOUND).
     */
    private void requireSamePool(VolumePool pool, ContentSource source) throws java.io.IOException {
        VolumePool holding = switch (source.getKindCase()) {
            case SNAPSHOT -> pools.findSnapshot(source.getSnapshot()).orElse(pool);
            case VOLUME -> pools.find(source.getVolume()).orElse(pool);
            case KIND_NOT_SET -> pool;
        };
        if (holding != pool) {
            throw CsiException.invalidArgument("the source of the new volume is in this node's " + NodePools.describe(holding.kind())
                    + ", the new volume is to be in its " + NodePools.describe(pool.kind()) + "; a restore or clone stays in its pool");
        }
    }

    /** The lock of a copy's source: the volume's name, or the snapshot's key. */
    private static String sourceLockKey(ContentSource source) {
        return switch (source.getKindCase()) {
            case SNAPSHOT -> snapshotName(source.getSnapshot());
            case VOLUME -> name(source.getVolume());
            case KIND_NOT_SET -> throw CsiException.invalidArgument("source names neither a snapshot nor a volume");
        };
    }

    /** The snapshot's lock key, once the name is checked. */
    private static String snapshotName(String name) {
        if (name.isEmpty()) {
            throw CsiException.missing("name");
        }
        LocalSnapshotId.checkName(name);
        return PoolSnapshots.lockKey(name);
    }

    /** An LVM volume says its lv_type, an image its allocation: each pool's own, the other left unset. */
    static void checkNewVolume(long capacityBytes, PoolKind pool, Allocation allocation, LvType lvType) {
        if (capacityBytes <= 0) {
            throw CsiException.invalidArgument("capacity_bytes must be positive");
        }
        if (pool == PoolKind.POOL_LVM) {
            if (lvType != LvType.THIN && lvType != LvType.LINEAR) {
                throw CsiException.invalidArgument("lv_type must be THIN or LINEAR in the LVM pool, got " + lvType);
            }
            if (allocation != Allocation.ALLOCATION_UNSPECIFIED) {
                throw CsiException.invalidArgument("allocation is the image pool's; an LVM volume says its lv_type");
            }
        } else {
            if (allocation != Allocation.SPARSE && allocation != Allocation.FULL) {
                throw CsiException.invalidArgument("allocation must be SPARSE or FULL in the image pool, got " + allocation);
            }
            if (lvType != LvType.LV_TYPE_UNSPECIFIED) {
                throw CsiException.invalidArgument("lv_type is the LVM pool's; an image says its allocation");
            }
        }
    }

    private static String name(String name) {
        if (name.isEmpty()) {
            throw CsiException.missing("name");
        }
        LocalVolumeId.checkName(name);
        return name;
    }
}
