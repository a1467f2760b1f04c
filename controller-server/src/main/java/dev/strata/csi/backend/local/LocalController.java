package dev.strata.csi.backend.local;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.agent.api.AttachImageRequest;
import dev.strata.csi.agent.api.DeleteImageRequest;
import dev.strata.csi.agent.api.DetachImageRequest;
import dev.strata.csi.agent.api.ExpandImageRequest;
import dev.strata.csi.agent.api.GetImageRequest;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.agent.api.ListImagesRequest;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.backend.ControllerBackend;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.rpc.CsiException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * The local backend on the controller. It keeps no state: a volume's id names the node whose
 * agent holds the volume's image, and the agents' registrations say which nodes exist; every
 * call is a call to that node's agent. Any StorageClass parameters without another backend's
 * come here (it refuses the ones it does not know).
 */
public final class LocalController implements ControllerBackend<VolumeId, VolumeRequest> {

    /** The publish_context key naming the loop device the image is attached to. */
    public static final String DEVICE_PATH = "devicePath";

    private final AgentDirectory agents;
    private final Topology topology;
    private final Placement placement;
    private final LocalCapabilities capabilities = new LocalCapabilities();

    public LocalController(AgentDirectory agents, Topology topology) {
        this.agents = agents;
        this.topology = topology;
        this.placement = new Placement(agents, topology);
    }

    @Override
    public boolean wanted(Map<String, String> parameters) {
        return true;
    }

    @Override
    public Optional<VolumeId> byId(String volumeId) {
        return VolumeId.parse(volumeId);
    }

    /** The volume's name, unique across the cluster: a create locks it before a node is chosen. */
    @Override
    public String lockKey(VolumeId id) {
        return id.name();
    }

    @Override
    public Capabilities capabilities() {
        return capabilities;
    }

    @Override
    public VolumeRequest check(CreateVolumeRequest request) {
        return VolumeRequest.of(request);
    }

    @Override
    public String createLockKey(VolumeRequest request) {
        return request.name();
    }

    @Override
    public Volume create(VolumeRequest wanted) {
        var existing = placement.find(wanted.name(), placement.firstCandidate(wanted.requirements()));
        if (existing.isPresent()) {
            Image image = existing.get().image();
            if (image.getCapacityBytes() != wanted.capacityBytes() || image.getAllocation() != wanted.allocation()) {
                throw CsiException.alreadyExists("volume " + wanted.name() + " exists on node " + existing.get().nodeId()
                        + " with " + image.getCapacityBytes() + " bytes, " + image.getAllocation()
                        + "; asked for " + wanted.capacityBytes() + " bytes, " + wanted.allocation());
            }
        }
        Placement.Placed placed = existing.isPresent() ? existing.get() : placement.create(wanted, wanted.requirements());
        return volume(placed.nodeId(), placed.image());
    }

    @Override
    public void delete(VolumeId id) {
        agents.stub(id.nodeId()).deleteImage(DeleteImageRequest.newBuilder().setName(id.name()).build());
    }

    /** Attaches the image to a loop device on its node: only there, since the data is there. */
    @Override
    public Map<String, String> publish(VolumeId id, String nodeId, VolumeCapability capability) {
        if (!id.nodeId().equals(nodeId)) {
            get(id); // NOT_FOUND comes first for a volume that does not exist
            throw CsiException.failedPrecondition("volume " + id + " holds its data on node " + id.nodeId()
                    + " and cannot be attached to node " + nodeId);
        }
        Image image = agents.stub(id.nodeId()).attachImage(AttachImageRequest.newBuilder()
                .setName(id.name()).setNodeId(nodeId).build()).getImage();
        return Map.of(DEVICE_PATH, image.getDevicePath());
    }

    /** A node the volume never lived on: it is not published there. */
    @Override
    public void unpublish(VolumeId id, String nodeId) {
        if (nodeId.isEmpty() || nodeId.equals(id.nodeId())) {
            agents.stub(id.nodeId()).detachImage(DetachImageRequest.newBuilder()
                    .setName(id.name()).setNodeId(id.nodeId()).build());
        }
    }

    /**
     * Grows the image on its node, to whole MiB as images are made; the agent grows its loop device
     * too when attached. A filesystem then grows on the node; a raw block device needs nothing more.
     */
    @Override
    public Expansion expand(VolumeId id, long bytes, Optional<VolumeCapability> capability) {
        long size = Math.ceilDiv(bytes, VolumeRequest.MIB) * VolumeRequest.MIB;
        Image image = agents.stub(id.nodeId()).expandImage(ExpandImageRequest.newBuilder()
                .setName(id.name()).setCapacityBytes(size).build()).getImage();
        boolean block = capability.map(LocalCapabilities::isBlock).orElse(false);
        return new Expansion(image.getCapacityBytes(), !block);
    }

    @Override
    public Optional<String> validate(VolumeId id, Map<String, String> parameters) {
        get(id);
        return VolumeRequest.parameterProblem(parameters);
    }

    /**
     * The volumes of every node that registered. A node whose agent does not answer fails the call
     * (UNAVAILABLE) rather than leaving its volumes out: the external-attacher reads a missing
     * volume as a detached one.
     */
    @Override
    public List<ListVolumesResponse.Entry> list() {
        if (agents.settling()) {
            throw CsiException.unavailable("controller-server started recently; waiting for node agents to renew before listing volumes");
        }
        List<ListVolumesResponse.Entry> entries = new ArrayList<>();
        for (AgentDirectory.Agent agent : agents.registered()) {
            for (Image image : agents.stub(agent.nodeId()).listImages(ListImagesRequest.getDefaultInstance()).getImagesList()) {
                entries.add(ListVolumesResponse.Entry.newBuilder()
                        .setVolume(Volume.newBuilder()
                                .setVolumeId(new VolumeId(agent.nodeId(), image.getName()).toString())
                                .setCapacityBytes(image.getCapacityBytes())
                                .addAccessibleTopology(topology.of(agent.nodeId())))
                        .setStatus(ListVolumesResponse.VolumeStatus.newBuilder()
                                .addAllPublishedNodeIds(image.getPublishedNodeIdsList()))
                        .build());
            }
        }
        return entries;
    }

    /** The pool of the node the topology names; without topology the emptiest node's, since a volume lives on one node. */
    @Override
    public long availableBytes(GetCapacityRequest request) {
        if (request.hasAccessibleTopology()) {
            return topology.nodeOf(request.getAccessibleTopology())
                    .flatMap(agents::poolOf) // empty: a segment that names no node with an agent
                    .map(PoolStatus::getAvailableBytes)
                    .orElse(0L);
        }
        List<Long> free = agents.live().stream().map(agent -> agent.pool().getAvailableBytes()).toList();
        if (free.isEmpty() && (agents.settling() || !agents.registered().isEmpty())) {
            throw CsiException.unavailable("no node agent has a current lease: they have not registered since "
                    + "controller-server started, or are restarting");
        }
        return free.stream().mapToLong(Long::longValue).max().orElse(0);
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
                .putVolumeContext(VolumeRequest.ALLOCATION, image.getAllocation().name().toLowerCase(Locale.ROOT))
                .build();
    }
}
