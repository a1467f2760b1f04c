package dev.strata.csi.controller.local;

import csi.v1.Csi.TopologyRequirement;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.CreateImageRequest;
import dev.strata.csi.agent.api.GetImageRequest;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.backend.local.Topology;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * Where a new volume goes: the nodes the accessibility requirements name, preferred first (with
 * WaitForFirstConsumer, preferred[0] is the node the scheduler picked), then requisite; with no
 * requirements, the node with the most available capacity. The first that has room gets it.
 */
final class Placement {

    record Placed(String nodeId, Image image) {}

    private final AgentDirectory agents;
    private final Topology topology;

    Placement(AgentDirectory agents, Topology topology) {
        this.agents = agents;
        this.topology = topology;
    }

    /**
     * The volume named {@code name} on any live node other than {@code except}: names are unique
     * across the cluster. The node a create goes to first need not be asked, since CreateImage
     * there returns the existing image itself (or ALREADY_EXISTS).
     */
    Optional<Placed> find(String name, Optional<String> except) {
        if (agents.settling()) {
            throw CsiException.unavailable("controller-server started recently; waiting for node agents to renew "
                    + "before it can tell whether volume " + name + " exists");
        }
        for (AgentDirectory.Agent agent : agents.registered()) {
            if (except.isPresent() && except.get().equals(agent.nodeId())) {
                continue;
            }
            try {
                Image image = agents.stub(agent.nodeId()).getImage(GetImageRequest.newBuilder().setName(name).build()).getImage();
                return Optional.of(new Placed(agent.nodeId(), image));
            } catch (StatusRuntimeException e) {
                boolean silent = agents.live(agent.nodeId()).isEmpty();
                if (silent && e.getStatus().getCode() == Status.Code.UNAVAILABLE) {
                    continue; // a node whose lease ran out long enough to be unreachable takes no new volumes either
                }
                if (e.getStatus().getCode() != Status.Code.NOT_FOUND) {
                    throw CsiException.unavailable("cannot tell whether node " + agent.nodeId() + " holds volume " + name
                            + ": " + e.getStatus().getCode() + " " + e.getStatus().getDescription());
                }
            }
        }
        return Optional.empty();
    }

    /** The node a create for {@code requirement} tries first, if any. */
    Optional<String> firstCandidate(TopologyRequirement requirement) {
        return candidates(requirement).stream().findFirst();
    }

    Placed create(VolumeRequest wanted, TopologyRequirement requirement) {
        return create(wanted, candidates(requirement), Optional.empty());
    }

    /** Whether the requirement lets a volume go to {@code nodeId}: it names that node, or no node at all. */
    boolean allows(TopologyRequirement requirement, String nodeId) {
        return requirement.getPreferredCount() + requirement.getRequisiteCount() == 0 || candidates(requirement).contains(nodeId);
    }

    /** Creates the volume on {@code nodeId} as a copy of {@code source}, which is in that node's pool. */
    Placed createCopy(VolumeRequest wanted, String nodeId, ContentSource source) {
        return create(wanted, List.of(nodeId), Optional.of(source));
    }

    private Placed create(VolumeRequest wanted, List<String> candidates, Optional<ContentSource> source) {
        return place(wanted, candidates, nodeId -> {
            CreateImageRequest.Builder create = CreateImageRequest.newBuilder()
                    .setName(wanted.name())
                    .setCapacityBytes(wanted.capacityBytes())
                    .setAllocation(wanted.allocation());
            source.ifPresent(create::setSource);
            return agents.stub(nodeId).createImage(create.build()).getImage();
        });
    }

    /** How a volume is made on a node; RESOURCE_EXHAUSTED passes on to the next node. */
    @FunctionalInterface
    interface Maker<E extends Exception> {
        Image make(String nodeId) throws E;
    }

    /** Makes the volume with {@code maker} on the first node the requirement allows that has room. */
    <E extends Exception> Placed place(VolumeRequest wanted, Maker<E> maker) throws E {
        return place(wanted, candidates(wanted.requirements()), maker);
    }

    private <E extends Exception> Placed place(VolumeRequest wanted, List<String> candidates, Maker<E> maker) throws E {
        if (candidates.isEmpty()) {
            TopologyRequirement requirement = wanted.requirements();
            throw CsiException.resourceExhausted("no node agent is registered"
                    + (requirement.getRequisiteCount() + requirement.getPreferredCount() > 0 ? " for the requested topology" : ""));
        }
        List<String> refusals = new ArrayList<>();
        for (String nodeId : candidates) {
            var agent = agents.live(nodeId);
            if (agent.isEmpty()) {
                refusals.add(nodeId + ": no agent registered");
                continue;
            }
            if (agent.get().pool().getAvailableBytes() < wanted.capacityBytes()) {
                refusals.add(nodeId + ": " + agent.get().pool().getAvailableBytes() + " bytes available");
                continue;
            }
            try {
                return new Placed(nodeId, maker.make(nodeId));
            } catch (StatusRuntimeException e) {
                if (e.getStatus().getCode() != Status.Code.RESOURCE_EXHAUSTED) {
                    throw e;
                }
                refusals.add(nodeId + ": " + e.getStatus().getDescription());
            }
        }
        throw CsiException.resourceExhausted("no node can hold " + wanted.capacityBytes() + " bytes for volume "
                + wanted.name() + ": " + String.join("; ", refusals));
    }

    private List<String> candidates(TopologyRequirement requirement) {
        if (requirement.getPreferredCount() == 0 && requirement.getRequisiteCount() == 0) {
            return agents.live().stream().map(AgentDirectory.Agent::nodeId).toList();
        }
        Set<String> nodes = new LinkedHashSet<>();
        requirement.getPreferredList().forEach(segment -> topology.nodeOf(segment).ifPresent(nodes::add));
        requirement.getRequisiteList().forEach(segment -> topology.nodeOf(segment).ifPresent(nodes::add));
        return new ArrayList<>(nodes);
    }
}
