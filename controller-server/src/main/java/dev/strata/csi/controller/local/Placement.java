package dev.strata.csi.controller.local;

import csi.v1.Csi.TopologyRequirement;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.CreateImageRequest;
import dev.strata.csi.agent.api.CreateImageResponse;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.backend.local.Topology;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.controller.agents.VolumeIndex;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Stream;

/**
 * Where a new volume goes: the nodes the accessibility requirements name, preferred first (with
 * WaitForFirstConsumer, preferred[0] is the node the scheduler picked), then requisite; with no
 * requirements, the node with the most available capacity. The first that has room gets it.
 */
final class Placement {

    record Placed(String nodeId, Image image) {}

    private final AgentDirectory agents;
    private final Topology topology;
    /** Volume name to the node a create of it was sent to that did not answer. */
    private final Map<String, String> unanswered = new ConcurrentHashMap<>();

    Placement(AgentDirectory agents, Topology topology) {
        this.agents = agents;
        this.topology = topology;
    }

    /**
     * The volume named {@code name} wherever the index places it, whatever the topology says now;
     * empty when no node holds it. UNAVAILABLE while a node that could hold it has not reported.
     */
    Optional<Placed> find(String name) {
        List<VolumeIndex.Located<Image>> found = agents.index().images(name);
        if (found.isEmpty()) {
            agents.requireReported("whether volume " + name + " exists");
            return Optional.empty();
        }
        return Optional.of(new Placed(found.getFirst().nodeId(), found.getFirst().item()));
    }

    Placed create(VolumeRequest wanted, TopologyRequirement requirement) {
        return create(wanted, candidates(requirement), Optional.empty());
    }

    /** Whether the requirement lets a volume go to {@code nodeId}: it names that node, or no node at all. */
    boolean allows(TopologyRequirement requirement, String nodeId) {
        return requirement.getPreferredCount() + requirement.getRequisiteCount() == 0 || candidates(requirement).anyMatch(nodeId::equals);
    }

    /** Creates the volume on {@code nodeId} as a copy of {@code source}, which is in that node's pool. */
    Placed createCopy(VolumeRequest wanted, String nodeId, ContentSource source) {
        return create(wanted, Stream.of(nodeId), Optional.of(source));
    }

    private Placed create(VolumeRequest wanted, Stream<String> candidates, Optional<ContentSource> source) {
        return place(wanted, candidates, nodeId -> {
            CreateImageRequest.Builder create = CreateImageRequest.newBuilder()
                    .setName(wanted.name())
                    .setCapacityBytes(wanted.capacityBytes())
                    .setAllocation(wanted.allocation())
                    .setEncrypted(wanted.encrypted());
            source.ifPresent(create::setSource);
            CreateImageResponse created = agents.stub(nodeId).createImage(create.build());
            agents.index().image(nodeId, wanted.name(), created.getImage(), created.getGeneration());
            return created.getImage();
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

    private <E extends Exception> Placed place(VolumeRequest wanted, Stream<String> allowed, Maker<E> maker) throws E {
        // A create whose node did not answer may still be made there: its retries go there only,
        // until that node's lease runs out (a node gone for good must not hold the name for ever;
        // should it come back with the volume, the index shows the name on two nodes: docs/scale.md).
        String unansweredNode = unanswered.get(wanted.name());
        if (unansweredNode != null && agents.live(unansweredNode).isEmpty()) {
            unanswered.remove(wanted.name(), unansweredNode);
            unansweredNode = null;
        }
        // Read as far as needed: with no topology, from the emptiest node on until one has room.
        Iterator<String> candidates = (unansweredNode == null ? allowed : Stream.of(unansweredNode)).iterator();
        if (!candidates.hasNext()) {
            TopologyRequirement requirement = wanted.requirements();
            throw CsiException.resourceExhausted("no node agent is registered"
                    + (requirement.getRequisiteCount() + requirement.getPreferredCount() > 0 ? " for the requested topology" : ""));
        }
        List<String> refusals = new ArrayList<>();
        boolean silent = false;
        boolean full = false;
        while (candidates.hasNext()) {
            String nodeId = candidates.next();
            var agent = agents.live(nodeId);
            if (agent.isEmpty()) {
                refusals.add(nodeId + ": no agent registered");
                continue;
            }
            if (!agents.answering(nodeId) && unansweredNode == null) {
                refusals.add(nodeId + ": its agent does not answer");
                silent = true;
                continue;
            }
            if (agent.get().pool().getAvailableBytes() < wanted.capacityBytes()) {
                refusals.add(nodeId + ": " + agent.get().pool().getAvailableBytes() + " bytes available");
                full = true;
                continue;
            }
            try {
                Placed placed = new Placed(nodeId, maker.make(nodeId));
                unanswered.remove(wanted.name(), nodeId);
                return placed;
            } catch (StatusRuntimeException e) {
                if (e.getStatus().getCode() == Status.Code.UNAVAILABLE) {
                    unanswered.put(wanted.name(), nodeId);
                    throw e;
                }
                unanswered.remove(wanted.name(), nodeId);
                if (e.getStatus().getCode() != Status.Code.RESOURCE_EXHAUSTED) {
                    throw e;
                }
                refusals.add(nodeId + ": " + e.getStatus().getDescription());
                full = true;
            } catch (CsiException e) {
                if (e.code() == Status.Code.UNAVAILABLE) {
                    unanswered.put(wanted.name(), nodeId);
                }
                throw e;
            }
        }
        if (silent && !full) { // no node was found too small: one may have room once it answers
            throw CsiException.unavailable("no node the request allows can take volume " + wanted.name() + " now: "
                    + String.join("; ", refusals));
        }
        throw CsiException.resourceExhausted("no node can hold " + wanted.capacityBytes() + " bytes for volume "
                + wanted.name() + ": " + String.join("; ", refusals));
    }

    private Stream<String> candidates(TopologyRequirement requirement) {
        if (requirement.getPreferredCount() == 0 && requirement.getRequisiteCount() == 0) {
            return agents.emptiestFirst().map(AgentDirectory.Agent::nodeId);
        }
        Set<String> nodes = new LinkedHashSet<>();
        requirement.getPreferredList().forEach(segment -> topology.nodeOf(segment).ifPresent(nodes::add));
        requirement.getRequisiteList().forEach(segment -> topology.nodeOf(segment).ifPresent(nodes::add));
        return nodes.stream();
    }
}
