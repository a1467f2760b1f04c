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
import csi.v1.Csi.VolumeCapability;
import csi.v1.NodeGrpc;
import dev.strata.csi.backend.local.LocalCapabilities;
import dev.strata.csi.backend.local.Topology;
import dev.strata.csi.backend.local.VolumeId;
import dev.strata.csi.backend.nfs.NfsCapabilities;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountOptions;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import dev.strata.csi.rpc.VolumeLocks;
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
    private final RequestPaths paths;

    public NodeService(String nodeId, Topology topology, long maxVolumes, LocalVolumes volumes, NfsVolumes shares,
            VolumeLocks locks, Path kubeletDir, Path poolDir) {
        this.paths = new RequestPaths(kubeletDir, poolDir);
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
            Path staging = paths.require("staging_target_path", request.getStagingTargetPath());
            if (!request.hasVolumeCapability()) {
                throw CsiException.missing("volume_capability");
            }
            Optional<NfsVolume> share = share(request.getVolumeId(), request.getVolumeContextMap());
            requireCapability(share, request.getVolumeCapability());
            checkMountFlags(request.getVolumeCapability());
            try (var held = lock(request.getVolumeId())) {
                if (share.isPresent()) {
                    shares.stage(share.get(), staging, request.getVolumeCapability(), request.getVolumeContextMap());
                } else {
                    volumes.stage(volumeId(request.getVolumeId()), staging, request.getVolumeCapability());
                }
                return NodeStageVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodeUnstageVolume(NodeUnstageVolumeRequest request, StreamObserver<NodeUnstageVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path staging = paths.require("staging_target_path", request.getStagingTargetPath());
            boolean local = isLocal(request.getVolumeId());
            try (var held = lock(request.getVolumeId())) {
                if (local) {
                    volumes.unstage(staging);
                } else {
                    shares.unstage(staging);
                }
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
            Optional<NfsVolume> share = share(request.getVolumeId(), request.getVolumeContextMap());
            requireCapability(share, request.getVolumeCapability());
            boolean readOnly = request.getReadonly() || (share.isPresent()
                    ? NfsCapabilities.readOnlyMode(request.getVolumeCapability())
                    : LocalCapabilities.readOnlyMode(request.getVolumeCapability()));
            try (var held = lock(request.getVolumeId())) {
                if (share.isPresent()) {
                    shares.publish(share.get(), staging, target, request.getVolumeCapability(), request.getVolumeContextMap(), readOnly);
                } else {
                    volumes.publish(volumeId(request.getVolumeId()), staging, target, request.getVolumeCapability(), readOnly);
                }
                return NodePublishVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void nodeUnpublishVolume(NodeUnpublishVolumeRequest request, StreamObserver<NodeUnpublishVolumeResponse> response) {
        Rpc.answer(response, () -> {
            requireVolumeId(request.getVolumeId());
            Path target = paths.require("target_path", request.getTargetPath());
            boolean local = isLocal(request.getVolumeId());
            try (var held = lock(request.getVolumeId())) {
                if (local) {
                    volumes.unpublish(target);
                } else {
                    shares.unpublish(target);
                }
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
                path = paths.require("volume_path", request.getVolumePath());
            } catch (CsiException e) {
                throw CsiException.notFound("volume " + CsiException.printable(request.getVolumeId()) + " is not mounted at "
                        + CsiException.printable(request.getVolumePath()));
            }
            return isLocal(request.getVolumeId())
                    ? volumes.stats(volumeId(request.getVolumeId()), path)
                    : shares.stats(request.getVolumeId(), path);
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

    private static void checkMountFlags(VolumeCapability capability) {
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

    private static void requireCapability(Optional<NfsVolume> share, VolumeCapability capability) {
        if (share.isPresent()) {
            NfsCapabilities.require(List.of(capability), "volume_capability");
        } else {
            LocalCapabilities.require(List.of(capability), "volume_capability");
        }
    }

    /**
     * Whether the id names a volume of a local pool, which must then be this node's (NOT_FOUND
     * otherwise); any other id is an NFS volume's, dynamic or static.
     */
    private boolean isLocal(String volumeId) {
        if (VolumeId.parse(volumeId).isEmpty()) {
            return false;
        }
        volumeId(volumeId);
        return true;
    }

    /** One call at a time per volume: a local volume by its name, any other by its id. */
    private VolumeLocks.Held lock(String volumeId) {
        return locks.acquire(VolumeId.parse(volumeId).map(VolumeId::name).orElse(NFS_LOCK + volumeId));
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
