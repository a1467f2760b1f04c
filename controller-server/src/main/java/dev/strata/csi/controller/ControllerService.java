package dev.strata.csi.controller;

import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import csi.v1.Csi.ControllerGetCapabilitiesResponse;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerPublishVolumeResponse;
import csi.v1.Csi.ControllerServiceCapability;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeResponse;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.CreateVolumeResponse;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.DeleteVolumeResponse;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.GetCapacityResponse;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.ValidateVolumeCapabilitiesRequest;
import csi.v1.Csi.ValidateVolumeCapabilitiesResponse;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.agent.api.AttachImageRequest;
import dev.strata.csi.agent.api.DeleteImageRequest;
import dev.strata.csi.agent.api.DetachImageRequest;
import dev.strata.csi.agent.api.GetImageRequest;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.backend.local.LocalCapabilities;
import dev.strata.csi.backend.local.Topology;
import dev.strata.csi.backend.local.VolumeId;
import dev.strata.csi.backend.nfs.NfsCapabilities;
import dev.strata.csi.backend.nfs.NfsController;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import dev.strata.csi.rpc.VolumeLocks;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The CSI Controller service. It keeps no state: a local volume's id names the node whose agent
 * holds the volume, and the agents' registrations say which nodes exist; an NFS volume's id (or,
 * for a static volume, its volume context) names its export, where its record is kept.
 */
public final class ControllerService extends ControllerGrpc.ControllerImplBase {

    static final String DEVICE_PATH = "devicePath";

    private static final List<ControllerServiceCapability.RPC.Type> CAPABILITIES = List.of(
            ControllerServiceCapability.RPC.Type.CREATE_DELETE_VOLUME,
            ControllerServiceCapability.RPC.Type.PUBLISH_UNPUBLISH_VOLUME,
            ControllerServiceCapability.RPC.Type.LIST_VOLUMES,
            ControllerServiceCapability.RPC.Type.LIST_VOLUMES_PUBLISHED_NODES,
            ControllerServiceCapability.RPC.Type.GET_CAPACITY,
            ControllerServiceCapability.RPC.Type.SINGLE_NODE_MULTI_WRITER);

    private final AgentDirectory agents;
    private final Topology topology;
    private final Placement placement;
    private final NfsController nfs;
    private final VolumeLocks locks = new VolumeLocks();

    public ControllerService(AgentDirectory agents, Topology topology, NfsController nfs) {
        this.agents = agents;
        this.topology = topology;
        this.placement = new Placement(agents, topology);
        this.nfs = nfs;
    }

    @Override
    public void createVolume(CreateVolumeRequest request, StreamObserver<CreateVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (NfsController.wanted(request.getParametersMap())) {
                return CreateVolumeResponse.newBuilder().setVolume(nfs.create(request)).build();
            }
            VolumeRequest wanted = VolumeRequest.of(request);
            try (var held = locks.acquire(wanted.name())) {
                var existing = placement.find(wanted.name(), placement.firstCandidate(request.getAccessibilityRequirements()));
                if (existing.isPresent()) {
                    Image image = existing.get().image();
                    if (image.getCapacityBytes() != wanted.capacityBytes() || image.getAllocation() != wanted.allocation()) {
                        throw CsiException.alreadyExists("volume " + wanted.name() + " exists on node " + existing.get().nodeId()
                                + " with " + image.getCapacityBytes() + " bytes, " + image.getAllocation()
                                + "; asked for " + wanted.capacityBytes() + " bytes, " + wanted.allocation());
                    }
                }
                Placement.Placed placed = existing.isPresent() ? existing.get()
                        : placement.create(wanted, request.getAccessibilityRequirements());
                return CreateVolumeResponse.newBuilder().setVolume(volume(placed.nodeId(), placed.image())).build();
            }
        });
    }

    @Override
    public void deleteVolume(DeleteVolumeRequest request, StreamObserver<DeleteVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            var nfsId = NfsVolumeId.parse(request.getVolumeId());
            if (nfsId.isPresent()) {
                nfs.delete(nfsId.get());
            }
            var id = VolumeId.parse(request.getVolumeId());
            if (id.isPresent()) { // an id this driver never handed out names nothing to delete
                try (var held = locks.acquire(id.get().name())) {
                    agents.stub(id.get().nodeId()).deleteImage(DeleteImageRequest.newBuilder().setName(id.get().name()).build());
                }
            }
            return DeleteVolumeResponse.getDefaultInstance();
        });
    }

    @Override
    public void controllerPublishVolume(ControllerPublishVolumeRequest request,
            StreamObserver<ControllerPublishVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            if (request.getNodeId().isEmpty()) {
                throw CsiException.missing("node_id");
            }
            if (!request.hasVolumeCapability()) {
                throw CsiException.missing("volume_capability");
            }
            if (isNfs(request.getVolumeId(), request.getVolumeContextMap())) {
                NfsCapabilities.require(List.of(request.getVolumeCapability()), "volume_capability");
                requireNode(request.getNodeId());
                nfs.publish(request.getVolumeId(), request.getVolumeContextMap(), request.getNodeId(), request.getVolumeCapability());
                return ControllerPublishVolumeResponse.getDefaultInstance();
            }
            VolumeId id = VolumeId.require(request.getVolumeId());
            LocalCapabilities.require(List.of(request.getVolumeCapability()), "volume_capability");
            requireNode(request.getNodeId());
            try (var held = locks.acquire(id.name())) {
                if (!id.nodeId().equals(request.getNodeId())) {
                    get(id); // NOT_FOUND comes first for a volume that does not exist
                    throw CsiException.failedPrecondition("volume " + id + " holds its data on node " + id.nodeId()
                            + " and cannot be attached to node " + request.getNodeId());
                }
                Image image = agents.stub(id.nodeId()).attachImage(AttachImageRequest.newBuilder()
                        .setName(id.name()).setNodeId(request.getNodeId()).build()).getImage();
                return ControllerPublishVolumeResponse.newBuilder()
                        .putPublishContext(DEVICE_PATH, image.getDevicePath())
                        .build();
            }
        });
    }

    @Override
    public void controllerUnpublishVolume(ControllerUnpublishVolumeRequest request,
            StreamObserver<ControllerUnpublishVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            var id = VolumeId.parse(request.getVolumeId());
            if (id.isEmpty()) { // an NFS volume, dynamic or static, or one this driver never knew
                nfs.unpublish(request.getVolumeId(), request.getNodeId());
            }
            // Unknown volume, or a node it never lived on: it is not published there.
            if (id.isPresent() && (request.getNodeId().isEmpty() || request.getNodeId().equals(id.get().nodeId()))) {
                try (var held = locks.acquire(id.get().name())) {
                    agents.stub(id.get().nodeId()).detachImage(DetachImageRequest.newBuilder()
                            .setName(id.get().name()).setNodeId(id.get().nodeId()).build());
                }
            }
            return ControllerUnpublishVolumeResponse.getDefaultInstance();
        });
    }

    @Override
    public void validateVolumeCapabilities(ValidateVolumeCapabilitiesRequest request,
            StreamObserver<ValidateVolumeCapabilitiesResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            if (request.getVolumeCapabilitiesCount() == 0) {
                throw CsiException.missing("volume_capabilities");
            }
            boolean isNfs = isNfs(request.getVolumeId(), request.getVolumeContextMap());
            if (isNfs) {
                nfs.requireExists(request.getVolumeId(), request.getVolumeContextMap());
            } else {
                get(VolumeId.require(request.getVolumeId()));
                var parameterProblem = VolumeRequest.parameterProblem(request.getParametersMap());
                if (parameterProblem.isPresent()) {
                    return ValidateVolumeCapabilitiesResponse.newBuilder().setMessage(parameterProblem.get()).build();
                }
            }
            for (var capability : request.getVolumeCapabilitiesList()) {
                var reason = isNfs ? NfsCapabilities.unsupported(capability) : LocalCapabilities.unsupported(capability);
                if (reason.isPresent()) {
                    return ValidateVolumeCapabilitiesResponse.newBuilder().setMessage(reason.get()).build();
                }
            }
            return ValidateVolumeCapabilitiesResponse.newBuilder()
                    .setConfirmed(ValidateVolumeCapabilitiesResponse.Confirmed.newBuilder()
                            .putAllVolumeContext(request.getVolumeContextMap())
                            .addAllVolumeCapabilities(request.getVolumeCapabilitiesList())
                            .putAllParameters(request.getParametersMap()))
                    .build();
        });
    }

    @Override
    public void listVolumes(ListVolumesRequest request, StreamObserver<ListVolumesResponse> response) {
        Rpc.answer(response, () -> {
            VolumeListing listing = new VolumeListing(agents, topology);
            listing.checkToken(request);
            List<ListVolumesResponse.Entry> entries = new ArrayList<>(listing.localEntries());
            entries.addAll(nfs.entries());
            return VolumeListing.page(request, entries);
        });
    }

    @Override
    public void getCapacity(GetCapacityRequest request, StreamObserver<GetCapacityResponse> response) {
        Rpc.answer(response, () -> {
            boolean isNfs = NfsController.wanted(request.getParametersMap());
            for (var capability : request.getVolumeCapabilitiesList()) {
                // external-provisioner's capacity controller asks with access mode UNKNOWN, meaning any:
                // then only the access type (mount or block, the filesystem) is asked about.
                if (capability.getAccessMode().getMode() == VolumeCapability.AccessMode.Mode.UNKNOWN) {
                    capability = capability.toBuilder().setAccessMode(VolumeCapability.AccessMode.newBuilder()
                            .setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)).build();
                }
                if ((isNfs ? NfsCapabilities.unsupported(capability) : LocalCapabilities.unsupported(capability)).isPresent()) {
                    return GetCapacityResponse.getDefaultInstance();
                }
            }
            long available;
            if (isNfs) {
                available = nfs.availableBytes(request.getParametersMap()); // an export is reachable from every node
            } else if (request.hasAccessibleTopology()) {
                available = topology.nodeOf(request.getAccessibleTopology())
                        .flatMap(agents::poolOf) // empty: a segment that names no node with an agent
                        .map(PoolStatus::getAvailableBytes)
                        .orElse(0L);
            } else {
                // A volume lives on one node: the most it can get is the emptiest node's space.
                List<Long> free = agents.live().stream().map(agent -> agent.pool().getAvailableBytes()).toList();
                if (free.isEmpty() && (agents.settling() || !agents.registered().isEmpty())) {
                    throw CsiException.unavailable("no node agent has a current lease: they have not registered since "
                            + "controller-server started, or are restarting");
                }
                available = free.stream().mapToLong(Long::longValue).max().orElse(0);
            }
            return GetCapacityResponse.newBuilder()
                    .setAvailableCapacity(available)
                    .setMaximumVolumeSize(com.google.protobuf.Int64Value.of(available))
                    .build();
        });
    }

    @Override
    public void controllerGetCapabilities(ControllerGetCapabilitiesRequest request,
            StreamObserver<ControllerGetCapabilitiesResponse> response) {
        Rpc.answer(response, () -> {
            var reply = ControllerGetCapabilitiesResponse.newBuilder();
            for (var type : CAPABILITIES) {
                reply.addCapabilitiesBuilder().getRpcBuilder().setType(type);
            }
            return reply.build();
        });
    }

    /** A volume id of the NFS form, or any other id that comes with an NFS volume context (a static volume). */
    private static boolean isNfs(String volumeId, Map<String, String> context) {
        return NfsVolumeId.parse(volumeId).isPresent()
                || (VolumeId.parse(volumeId).isEmpty() && NfsVolume.fromContext(context).isPresent());
    }

    private void requireNode(String nodeId) {
        agents.requireKnown(nodeId, "node " + CsiException.printable(nodeId) + " is not known: no node agent registered for it");
    }

    /** The volume's image; NOT_FOUND when its node never registered or its agent does not have it. */
    private Image get(VolumeId id) {
        agents.requireKnown(id.nodeId(), "volume " + id + " does not exist: node " + id.nodeId() + " has no agent");
        return agents.stub(id.nodeId()).getImage(GetImageRequest.newBuilder().setName(id.name()).build()).getImage();
    }

    private Volume volume(String nodeId, Image image) {
        return Volume.newBuilder()
                .setVolumeId(new VolumeId(nodeId, image.getName()).toString())
                .setCapacityBytes(image.getCapacityBytes())
                .addAccessibleTopology(topology.of(nodeId))
                .putVolumeContext(VolumeRequest.ALLOCATION, image.getAllocation().name().toLowerCase(java.util.Locale.ROOT))
                .build();
    }
}
