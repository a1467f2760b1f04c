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
import dev.strata.csi.volume.Topology;
import dev.strata.csi.volume.VolumeId;
import io.grpc.stub.StreamObserver;
import java.nio.file.Path;
import java.util.List;

/**
 * The CSI Node service for local volumes: stage (make a filesystem if blank, mount at the staging
 * path) and publish (bind into the pod). Which device a volume uses is asked of this node's pool,
 * never taken from the publish context alone: after a reboot the loop device number may differ
 * from the one the attacher recorded.
 */
public final class NodeService extends NodeGrpc.NodeImplBase {

    private static final List<NodeServiceCapability.RPC.Type> CAPABILITIES = List.of(
            NodeServiceCapability.RPC.Type.STAGE_UNSTAGE_VOLUME,
            NodeServiceCapability.RPC.Type.GET_VOLUME_STATS,
            NodeServiceCapability.RPC.Type.VOLUME_CONDITION,
            NodeServiceCapability.RPC.Type.SINGLE_NODE_MULTI_WRITER);

    private final String nodeId;
    private final Topology topology;
    private final long maxVolumes;
    private final LocalVolumes volumes;
    private final VolumeLocks locks;

    public NodeService(String nodeId, Topology topology, long maxVolumes, LocalVolumes volumes, VolumeLocks locks) {
        this.nodeId = nodeId;
        this.topology = topology;
        this.maxVolumes = maxVolumes;
        this.volumes = volumes;
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
            VolumeId id = volumeId(request.getVolumeId());
            // A path that is not even absolute cannot be where the volume is mounted.
            Path path;
            try {
                path = RequestPaths.require("volume_path", request.getVolumePath());
            } catch (CsiException e) {
                throw CsiException.notFound("volume " + id + " is not mounted at " + CsiException.printable(request.getVolumePath()));
            }
            return volumes.stats(id, path);
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
