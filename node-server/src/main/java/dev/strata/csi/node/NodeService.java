package dev.strata.csi.node;

import csi.v1.Csi.NodeExpandVolumeRequest;
import csi.v1.Csi.NodeExpandVolumeResponse;
import csi.v1.Csi.NodeGetCapabilitiesRequest;
import csi.v1.Csi.NodeGetCapabilitiesResponse;
import csi.v1.Csi.NodeGetInfoRequest;
import csi.v1.Csi.NodeGetInfoResponse;
import csi.v1.Csi.NodeGetVolumeStatsRequest;
import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodePublishVolumeResponse;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeStageVolumeResponse;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeResponse;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeResponse;
import csi.v1.Csi.VolumeCapability;
import csi.v1.NodeGrpc;
import dev.strata.csi.backend.local.LocalTopology;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountOptions;
import dev.strata.csi.node.backend.NodeBackends;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import dev.strata.csi.rpc.VolumeLocks;
import io.grpc.stub.StreamObserver;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * The CSI Node service. Each call checks its request, chooses the backend that serves the volume
 * once ({@link NodeBackends}: by the volume id's scheme, or a static volume's context), takes the
 * volume's lock and delegates to the backend; what a volume can be is the backend's answer too.
 * Nothing here knows a backend's rules.
 */
public final class NodeService extends NodeGrpc.NodeImplBase {

    private final String nodeId;
    private final LocalTopology topology;
    private final long maxVolumes;
    private final NodeBackends backends;
    private final VolumeLocks locks;
    private final RequestPaths paths;

    public NodeService(String nodeId, LocalTopology topology, long maxVolumes, NodeBackends backends, VolumeLocks locks,
            Path kubeletDir, Path poolDir) {
        this.paths = new RequestPaths(kubeletDir, poolDir);
        this.nodeId = nodeId;
        this.topology = topology;
        this.maxVolumes = maxVolumes;
        this.backends = backends;
        this.locks = locks;
    }

    @Override
    public void nodeStageVolume(NodeStageVolumeRequest request, StreamObserver<NodeStageVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path staging = paths.require("staging_target_path", request.getStagingTargetPath());
            if (!request.hasVolumeCapability()) {
                throw CsiException.missing("volume_capability");
            }
            var volume = backends.withContext(request.getVolumeId(), request.getVolumeContextMap());
            volume.requireKnownContext(request.getVolumeContextMap());
            volume.capabilities().require(List.of(request.getVolumeCapability()), "volume_capability");
            checkMountFlags(request.getVolumeCapability());
            try (var held = locks.acquire(volume.lockKey())) {
                volume.stage(staging, request.getVolumeCapability(), request.getVolumeContextMap(), request.getSecretsMap());
                return NodeStageVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodeUnstageVolume(NodeUnstageVolumeRequest request, StreamObserver<NodeUnstageVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path staging = paths.require("staging_target_path", request.getStagingTargetPath());
            var volume = backends.withoutContext(request.getVolumeId());
            try (var held = locks.acquire(volume.lockKey())) {
                volume.unstage(staging);
                return NodeUnstageVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodePublishVolume(NodePublishVolumeRequest request, StreamObserver<NodePublishVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path target = paths.require("target_path", request.getTargetPath());
            Path staging = paths.require("staging_target_path", request.getStagingTargetPath());
            if (!request.hasVolumeCapability()) {
                throw CsiException.missing("volume_capability");
            }
            var volume = backends.withContext(request.getVolumeId(), request.getVolumeContextMap());
            volume.requireKnownContext(request.getVolumeContextMap());
            volume.capabilities().require(List.of(request.getVolumeCapability()), "volume_capability");
            boolean readOnly = request.getReadonly() || volume.capabilities().readOnly(request.getVolumeCapability());
            try (var held = locks.acquire(volume.lockKey())) {
                volume.publish(staging, target, request.getVolumeCapability(), request.getVolumeContextMap(), readOnly);
                return NodePublishVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodeUnpublishVolume(NodeUnpublishVolumeRequest request, StreamObserver<NodeUnpublishVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path target = paths.require("target_path", request.getTargetPath());
            var volume = backends.withoutContext(request.getVolumeId());
            try (var held = locks.acquire(volume.lockKey())) {
                volume.unpublish(target);
                return NodeUnpublishVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodeExpandVolume(NodeExpandVolumeRequest request, StreamObserver<NodeExpandVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path path = volumePath(request.getVolumeId(), request.getVolumePath());
            if (request.hasCapacityRange() && request.getCapacityRange().getLimitBytes() > 0
                    && request.getCapacityRange().getRequiredBytes() > request.getCapacityRange().getLimitBytes()) {
                throw CsiException.outOfRange("capacity_range required_bytes exceeds limit_bytes");
            }
            var volume = backends.withoutContext(request.getVolumeId());
            Optional<VolumeCapability> capability = request.hasVolumeCapability()
                    ? Optional.of(request.getVolumeCapability()) : Optional.empty();
            capability.ifPresent(given -> volume.capabilities().require(List.of(given), "volume_capability"));
            try (var held = locks.acquire(volume.lockKey())) {
                return NodeExpandVolumeResponse.newBuilder().setCapacityBytes(volume.expand(path, capability, request.getSecretsMap())).build();
            }
        });
    }

    @Override
    public void nodeGetVolumeStats(NodeGetVolumeStatsRequest request, StreamObserver<NodeGetVolumeStatsResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path path = volumePath(request.getVolumeId(), request.getVolumePath());
            return backends.withoutContext(request.getVolumeId()).stats(path);
        });
    }

    @Override
    public void nodeGetCapabilities(NodeGetCapabilitiesRequest request, StreamObserver<NodeGetCapabilitiesResponse> response) {
        Rpc.answer(response, () -> {
            var reply = NodeGetCapabilitiesResponse.newBuilder();
            for (var type : backends.rpcCapabilities()) {
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

    private static void checkMountFlags(VolumeCapability capability) {
        try {
            MountOptions.join(capability.getMount().getMountFlagsList());
        } catch (MountException e) {
            throw CsiException.invalidArgument(e.getMessage());
        }
    }

    /**
     * The path a volume is staged or published at (NodeGetVolumeStats, NodeExpandVolume): a path
     * that is not even one kubelet could give cannot be where the volume is, so NOT_FOUND.
     */
    private Path volumePath(String volumeId, String value) {
        if (value.isEmpty()) {
            throw CsiException.missing("volume_path");
        }
        try {
            return paths.require("volume_path", value);
        } catch (CsiException e) {
            throw CsiException.notFound("volume " + CsiException.printable(volumeId) + " is not mounted at " + CsiException.printable(value));
        }
    }

    private static void requireVolumeId(String value) {
        if (value.isEmpty()) {
            throw CsiException.missing("volume_id");
        }
    }
}
