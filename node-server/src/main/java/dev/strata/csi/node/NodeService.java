package dev.strata.csi.node;

import csi.v1.Csi.NodeGetCapabilitiesRequest;
import csi.v1.Csi.NodeGetCapabilitiesResponse;
import csi.v1.Csi.NodeGetInfoRequest;
import csi.v1.Csi.NodeGetInfoResponse;
import csi.v1.Csi.NodeGetVolumeStatsRequest;
import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodePublishVolumeResponse;
import csi.v1.Csi.NodeServiceCapability;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeStageVolumeResponse;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeResponse;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeResponse;
import csi.v1.NodeGrpc;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountOptions;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.volume.Capabilities;
import dev.strata.csi.volume.NfsCapabilities;
import dev.strata.csi.volume.NfsVolume;
import dev.strata.csi.volume.NfsVolumeId;
import dev.strata.csi.volume.Topology;
import dev.strata.csi.volume.VolumeId;
import io.grpc.stub.StreamObserver;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The CSI Node service. Local volumes: stage (make a filesystem if blank, mount at the staging
 * path) and publish (bind into the pod); which device a volume uses is asked of this node's pool,
 * never taken from the publish context alone: after a reboot the loop device number may differ
 * from the one the attacher recorded. NFS volumes: stage mounts the share, publish binds it; a
 * volume is NFS when its id says so, or, for a static volume, when its volume context names a
 * server and a share. Unstage and unpublish of any id that is not a local one go by the mount table.
 */
public final class NodeService extends NodeGrpc.NodeImplBase {

    private static final List<NodeServiceCapability.RPC.Type> CAPABILITIES = List.of(
            NodeServiceCapability.RPC.Type.STAGE_UNSTAGE_VOLUME,
            NodeServiceCapability.RPC.Type.GET_VOLUME_STATS,
            NodeServiceCapability.RPC.Type.VOLUME_CONDITION,
            NodeServiceCapability.RPC.Type.SINGLE_NODE_MULTI_WRITER);

    /** NFS volumes are locked by id, which for a static volume may be any string: kept apart from the pool's image names. */
    private static final String NFS_LOCK = "nfs ";

    private final String nodeId;
    private final Topology topology;
    private final long maxVolumes;
    private final LocalVolumes volumes;
    private final NfsVolumes shares;
    private final VolumeLocks locks;

    public NodeService(String nodeId, Topology topology, long maxVolumes, LocalVolumes volumes, NfsVolumes shares,
            VolumeLocks locks) {
        this.nodeId = nodeId;
        this.topology = topology;
        this.maxVolumes = maxVolumes;
        this.volumes = volumes;
        this.shares = shares;
        this.locks = locks;
    }

    @Override
    public void nodeStageVolume(NodeStageVolumeRequest request, StreamObserver<NodeStageVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path staging = RequestPaths.require("staging_target_path", request.getStagingTargetPath());
            if (!request.hasVolumeCapability()) {
                throw CsiException.missing("volume_capability");
            }
            Optional<NfsVolume> share = share(request.getVolumeId(), request.getVolumeContextMap());
            if (share.isPresent()) {
                NfsCapabilities.require(List.of(request.getVolumeCapability()), "volume_capability");
                checkMountFlags(request.getVolumeCapability());
                try (var held = locks.acquire(NFS_LOCK + request.getVolumeId())) {
                    shares.stage(share.get(), staging, request.getVolumeCapability(), request.getVolumeContextMap());
                    return NodeStageVolumeResponse.getDefaultInstance();
                }
            }
            Capabilities.require(List.of(request.getVolumeCapability()), "volume_capability");
            checkMountFlags(request.getVolumeCapability());
            VolumeId id = volumeId(request.getVolumeId());
            try (var held = locks.acquire(id.name())) {
                volumes.stage(id, staging, request.getVolumeCapability());
                return NodeStageVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodeUnstageVolume(NodeUnstageVolumeRequest request, StreamObserver<NodeUnstageVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path staging = RequestPaths.require("staging_target_path", request.getStagingTargetPath());
            if (VolumeId.parse(request.getVolumeId()).isEmpty()) {
                try (var held = locks.acquire(NFS_LOCK + request.getVolumeId())) {
                    shares.unstage(staging);
                    return NodeUnstageVolumeResponse.getDefaultInstance();
                }
            }
            VolumeId id = volumeId(request.getVolumeId());
            try (var held = locks.acquire(id.name())) {
                volumes.unstage(staging);
                return NodeUnstageVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodePublishVolume(NodePublishVolumeRequest request, StreamObserver<NodePublishVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path target = RequestPaths.require("target_path", request.getTargetPath());
            Path staging = RequestPaths.require("staging_target_path", request.getStagingTargetPath());
            if (!request.hasVolumeCapability()) {
                throw CsiException.missing("volume_capability");
            }
            Optional<NfsVolume> share = share(request.getVolumeId(), request.getVolumeContextMap());
            if (share.isPresent()) {
                NfsCapabilities.require(List.of(request.getVolumeCapability()), "volume_capability");
                boolean readOnly = request.getReadonly() || NfsCapabilities.readOnlyMode(request.getVolumeCapability());
                try (var held = locks.acquire(NFS_LOCK + request.getVolumeId())) {
                    shares.publish(share.get(), staging, target, readOnly);
                    return NodePublishVolumeResponse.getDefaultInstance();
                }
            }
            Capabilities.require(List.of(request.getVolumeCapability()), "volume_capability");
            VolumeId id = volumeId(request.getVolumeId());
            boolean readOnly = request.getReadonly() || Capabilities.readOnlyMode(request.getVolumeCapability());
            try (var held = locks.acquire(id.name())) {
                volumes.publish(id, staging, target, request.getVolumeCapability(), readOnly);
                return NodePublishVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodeUnpublishVolume(NodeUnpublishVolumeRequest request, StreamObserver<NodeUnpublishVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path target = RequestPaths.require("target_path", request.getTargetPath());
            if (VolumeId.parse(request.getVolumeId()).isEmpty()) {
                try (var held = locks.acquire(NFS_LOCK + request.getVolumeId())) {
                    shares.unpublish(target);
                    return NodeUnpublishVolumeResponse.getDefaultInstance();
                }
            }
            VolumeId id = volumeId(request.getVolumeId());
            try (var held = locks.acquire(id.name())) {
                volumes.unpublish(target);
                return NodeUnpublishVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodeGetVolumeStats(NodeGetVolumeStatsRequest request, StreamObserver<NodeGetVolumeStatsResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            if (request.getVolumePath().isEmpty()) {
                throw CsiException.missing("volume_path");
            }
            // A path that is not even absolute cannot be where the volume is mounted.
            Path path;
            try {
                path = RequestPaths.require("volume_path", request.getVolumePath());
            } catch (CsiException e) {
                throw CsiException.notFound("volume " + CsiException.printable(request.getVolumeId()) + " is not mounted at "
                        + CsiException.printable(request.getVolumePath()));
            }
            if (VolumeId.parse(request.getVolumeId()).isEmpty()) {
                return shares.stats(request.getVolumeId(), path);
            }
            return volumes.stats(volumeId(request.getVolumeId()), path);
        });
    }

    @Override
    public void nodeGetCapabilities(NodeGetCapabilitiesRequest request, StreamObserver<NodeGetCapabilitiesResponse> response) {
        Rpc.answer(response, () -> {
            var reply = NodeGetCapabilitiesResponse.newBuilder();
            for (var type : CAPABILITIES) {
                reply.addCapabilitiesBuilder().getRpcBuilder().setType(type);
            }
            return reply.build();
        });
    }

    @Override
    public void nodeGetInfo(NodeGetInfoRequest request, StreamObserver<NodeGetInfoResponse> response) {
        Rpc.answer(response, () -> NodeGetInfoResponse.newBuilder()
                .setNodeId(nodeId)
                .setMaxVolumesPerNode(maxVolumes)
                .setAccessibleTopology(topology.of(nodeId))
                .build());
    }

    private static void checkMountFlags(csi.v1.Csi.VolumeCapability capability) {
        try {
            MountOptions.join(capability.getMount().getMountFlagsList());
        } catch (MountException e) {
            throw CsiException.invalidArgument(e.getMessage());
        }
    }

    /** The share of an NFS volume: named by its id, or (a static volume) by its volume context. */
    private static Optional<NfsVolume> share(String volumeId, Map<String, String> context) {
        Optional<NfsVolume> byId = NfsVolumeId.parse(volumeId).map(NfsVolumeId::volume);
        return byId.isPresent() || VolumeId.parse(volumeId).isPresent() ? byId : NfsVolume.fromContext(context);
    }

    private static void requireVolumeId(String value) {
        if (value.isEmpty()) {
            throw CsiException.missing("volume_id");
        }
    }

    /** The volume id, which must name a volume of this node; checked after the other fields are known to be there. */
    private VolumeId volumeId(String value) {
        VolumeId id = VolumeId.require(value);
        if (!id.nodeId().equals(nodeId)) {
            throw CsiException.notFound("volume " + id + " lives on node " + id.nodeId() + ", not on " + nodeId);
        }
        return id;
    }
}
