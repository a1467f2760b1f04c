package dev.strata.csi.controller.local;

import csi.v1.Csi.TopologyRequirement;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.CreateVolumeRequest;
import dev.strata.csi.agent.api.CreateVolumeResponse;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.backend.local.LocalTopology;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.controller.agents.VolumeIndex;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.Optional;
import java.util.Set;
import java.util.function.Predicate;
import java.util.stream.Stream;

/**
 * Where a new volume goes: the nodes the accessibility requirements name, preferred first (with
 * WaitForFirstConsumer, preferred[0] is the node the scheduler picked), then requisite; with no
 * requirements, the node with the most available capacity. The first that has room in the pool the
 * request asks for gets it; a node without that pool is passed over (RESOURCE_EXHAUSTED when no
 * node has it: with WaitForFirstConsumer, external-provisioner then has the pod scheduled again).
 */
final class Placement {

    record Placed(String nodeId, Volume volume) {}

    private final AgentDirectory agents;
    private final LocalTopology topology;
    private final Log log;
    /** Volume name to the node a create of it was sent to that did not answer. */
    private final Map<String, String> unanswered = new ConcurrentHashMap<>();

    Placement(AgentDirectory agents, LocalTopology topology, Log log) {
        this.agents = agents;
        this.topology = topology;
        this.log = log;
    }

    /**
     * The volume named as {@code wanted} wherever the index places it, whatever the topology says
     * now; empty when no node holds it. Where this controller made it, that node wins. A node's
     * report alone counts only from the node the request names first (the scheduler's pick, with
     * WaitForFirstConsumer: where this controller would make it first) and with what the request
     * asks ({@code asked}: size, pool, source), or from any node for a request without topology.
     * So a node reporting the name first (a compromised node's report of {@code pvc-<uid>})
     * neither captures the volume nor blocks its creation: it is logged, and the volume made as if
     * the name were free; should a node that holds it from an earlier call be among the candidates,
     * its agent answers the create with it. UNAVAILABLE while a node that could hold it has not reported.
     */
    Optional<Placed> find(VolumeRequest wanted, Predicate<Volume> asked) {
        List<VolumeIndex.Located<Volume>> found = agents.index().volumes(wanted.name());
        if (!found.isEmpty() && found.getFirst().made()) {
            return Optional.of(new Placed(found.getFirst().nodeId(), found.getFirst().item()));
        }
        Optional<String> first = named(wanted.requirements()).stream().findFirst();
        for (VolumeIndex.Located<Volume> reported : found) {
            if (first.map(reported.nodeId()::equals).orElse(true) && asked.test(reported.item())) {
                return Optional.of(new Placed(reported.nodeId(), reported.item()));
            }
            log.warn("a node reports a volume of the name that this controller did not make there, on another node than the"
                    + " request names first or unlike the request; ignored", "volume", wanted.name(), "node", reported.nodeId());
        }
        agents.requireReported("whether volume " + wanted.name() + " exists");
        return Optional.empty();
    }

    Placed create(VolumeRequest wanted, TopologyRequirement requirement) {
        return create(wanted, candidates(wanted, requirement), Optional.empty());
    }

    /** Whether the requirement lets a volume go to {@code nodeId}: it names that node, or no node at all. */
    boolean allows(TopologyRequirement requirement, String nodeId) {
        return requirement.getPreferredCount() + requirement.getRequisiteCount() == 0 || named(requirement).contains(nodeId);
    }

    /** The node the requirement names first (with WaitForFirstConsumer: the scheduler's pick); empty without topology. */
    Optional<String> first(TopologyRequirement requirement) {
        return named(requirement).stream().findFirst();
    }

    /** Creates the volume on {@code nodeId} as a copy of {@code source}, which is in that node's pool. */
    Placed createCopy(VolumeRequest wanted, String nodeId, ContentSource source) {
        return create(wanted, Stream.of(nodeId), Optional.of(source));
    }

    private Placed create(VolumeRequest wanted, Stream<String> candidates, Optional<ContentSource> source) {
        return place(wanted, candidates, nodeId -> {
            CreateVolumeRequest.Builder create = CreateVolumeRequest.newBuilder()
                    .setName(wanted.name())
                    .setCapacityBytes(wanted.capacityBytes())
                    .setAllocation(wanted.allocation())
                    .setLvType(wanted.lvType())
                    .setPool(wanted.pool().kind())
                    .setThinOvercommitRatio(wanted.pool().thinOvercommitRatio())
                    .setEncrypted(wanted.encrypted());
            source.ifPresent(create::setSource);
            CreateVolumeResponse created = agents.stub(nodeId).createVolume(create.build());
            agents.index().volume(nodeId, wanted.name(), created.getVolume(), created.getGeneration());
            return created.getVolume();
        });
    }

    /** How a volume is made on a node; RESOURCE_EXHAUSTED passes on to the next node. */
    @FunctionalInterface
    interface Maker<E extends Exception> {
        Volume make(String nodeId) throws E;
    }

    /** Makes the volume with {@code maker} on the first node the requirement allows that has room. */
    <E extends Exception> Placed place(VolumeRequest wanted, Maker<E> maker) throws E {
        return place(wanted, candidates(wanted, wanted.requirements()), maker);
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
            Optional<Long> available = wanted.pool().available(agent.get());
            if (available.isEmpty()) {
                refusals.add(nodeId + ": no " + wanted.pool().describe() + (wanted.pool().kind() == PoolKind.POOL_LVM
                        ? " (its node-server runs without --volume-group)" : " (its node-server runs with --image-pool=false)"));
                full = true;
                continue;
            }
            if (available.get() < wanted.capacityBytes()) {
                refusals.add(nodeId + ": " + available.get() + " bytes available in its " + wanted.pool().describe());
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

    /**
     * The nodes the requirement names, in its order; with none, every live node with the request's
     * pool, the most room first. The directory keeps agents in the order of the image pool's room,
     * so that case reads only as far as a node with room; for an LVM pool they are sorted per call.
     */
    private Stream<String> candidates(VolumeRequest wanted, TopologyRequirement requirement) {
        if (requirement.getPreferredCount() == 0 && requirement.getRequisiteCount() == 0) {
            if (wanted.pool().kind() == PoolKind.POOL_IMAGE) {
                return agents.emptiestFirst().map(AgentDirectory.Agent::nodeId);
            }
            record Room(String nodeId, long bytes) { }
            return agents.live().stream()
                    .flatMap(agent -> wanted.pool().available(agent).map(bytes -> new Room(agent.nodeId(), bytes)).stream())
                    .sorted(Comparator.comparingLong(Room::bytes).reversed())
                    .map(Room::nodeId);
        }
        return named(requirement).stream();
    }

    private Set<String> named(TopologyRequirement requirement) {
        Set<String> nodes = new LinkedHashSet<>();
        requirement.getPreferredList().forEach(segment -> topology.nodeOf(segment).ifPresent(nodes::add));
        requirement.getRequisiteList().forEach(segment -> topology.nodeOf(segment).ifPresent(nodes::add));
        return nodes;
    }
}
