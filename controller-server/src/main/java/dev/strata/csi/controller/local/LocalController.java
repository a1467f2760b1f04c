package dev.strata.csi.controller.local;

import csi.v1.Csi.ControllerServiceCapability;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.agent.api.AttachVolumeRequest;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.CreateSnapshotRequest;
import dev.strata.csi.agent.api.DeleteSnapshotRequest;
import dev.strata.csi.agent.api.DeleteVolumeRequest;
import dev.strata.csi.agent.api.DetachVolumeRequest;
import dev.strata.csi.agent.api.ExpandVolumeRequest;
import dev.strata.csi.agent.api.GetVolumeRequest;
import dev.strata.csi.agent.api.IoLimits;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.SetIoLimitsRequest;
import dev.strata.csi.backend.local.GroupSnapshotId;
import dev.strata.csi.backend.local.LocalCapabilities;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.LocalTopology;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.backend.local.LocalVolumeScheme;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.controller.agents.VolumeIndex;
import dev.strata.csi.controller.backend.ControllerBackend;
import dev.strata.csi.controller.backend.SnapshotFilter;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.function.Predicate;

/**
 * The local backend on the controller. What volumes and snapshots exist it keeps nowhere: a
 * volume's id names the node whose agent holds the volume's data, the agents' registrations say
 * which nodes exist, and their reports where every volume and snapshot is
 * ({@link dev.strata.csi.controller.agents.VolumeIndex}); a call is a call to the one node it is
 * about (two for a copy between nodes), never to every node. It holds only what calls in flight
 * need, in memory and lost at a restart without harm: the node each unanswered create went to
 * ({@link Placement}, so that its retry goes there too) and the copies between nodes running in
 * the background ({@link Transfers}, so that a retry joins its copy). Any StorageClass parameters
 * without another backend's come here (it refuses the ones it does not know).
 */
public final class LocalController implements ControllerBackend<LocalVolumeId, VolumeRequest>, LocalVolumeScheme {

    /** The publish_context key naming the block device the volume is attached through (loop device or logical volume). */
    public static final String DEVICE_PATH = "devicePath";

    private final AgentDirectory agents;
    private final LocalTopology topology;
    private final Placement placement;
    private final CrossNodeCopies copies;
    private final SnapshotCopies snapshotCopies;
    private final Crashes<LocalCrashPoint> crashes;
    private final Log log;

    public LocalController(AgentDirectory agents, LocalTopology topology, ContentRelay relay, Crashes<LocalCrashPoint> crashes, Log log) {
        this.agents = agents;
        this.topology = topology;
        this.crashes = crashes;
        this.log = log;
        this.placement = new Placement(agents, topology, log);
        this.copies = new CrossNodeCopies(agents, relay);
        this.snapshotCopies = new SnapshotCopies(agents, relay, crashes, Clock.systemUTC(), log);
    }

    /** The snapshot copies, for the wiring: their gauge and their reconcile pass. */
    SnapshotCopies snapshotCopies() {
        return snapshotCopies;
    }

    @Override
    public boolean wanted(Map<String, String> parameters) {
        return true;
    }

    @Override
    public VolumeRequest check(CreateVolumeRequest request) {
        return VolumeRequest.of(request);
    }

    @Override
    public String createLockKey(VolumeRequest request) {
        return request.name();
    }

    /** What every backend does, and snapshots, restore and clone, and IO limits as mutable parameters. */
    @Override
    public List<ControllerServiceCapability.RPC.Type> rpcCapabilities() {
        List<ControllerServiceCapability.RPC.Type> types = new ArrayList<>(ControllerBackend.super.rpcCapabilities());
        types.addAll(List.of(
                ControllerServiceCapability.RPC.Type.CREATE_DELETE_SNAPSHOT,
                ControllerServiceCapability.RPC.Type.LIST_SNAPSHOTS,
                ControllerServiceCapability.RPC.Type.CLONE_VOLUME,
                ControllerServiceCapability.RPC.Type.MODIFY_VOLUME));
        return types;
    }

    /**
     * The volume made (or found, for a repeated call), then its IO limits recorded by its node's
     * agent: a call cut short between the two is repeated by external-provisioner, which sets them.
     */
    @Override
    public Volume create(VolumeRequest wanted) throws Exception {
        Volume volume = wanted.source().isPresent() ? createCopy(wanted, Origin.of(wanted.source().get())) : createEmpty(wanted);
        if (IoLimitParameters.any(wanted.ioLimits())) {
            LocalVolumeId id = LocalVolumeId.parse(volume.getVolumeId()).orElseThrow();
            setIoLimits(id, wanted.ioLimits());
        }
        return volume;
    }

    private Volume createEmpty(VolumeRequest wanted) throws Exception {
        Predicate<dev.strata.csi.agent.api.Volume> same = volume -> volume.getCapacityBytes() == wanted.capacityBytes()
                && wanted.pool().sameType(volume) && wanted.pool().holds(volume) && volume.getEncrypted() == wanted.encrypted();
        var existing = placement.find(wanted, volume -> same.test(volume) && !volume.hasSource());
        if (existing.isPresent()) {
            dev.strata.csi.agent.api.Volume volume = existing.get().volume();
            if (!same.test(volume)) {
                throw CsiException.alreadyExists("volume " + wanted.name() + " exists on node " + existing.get().nodeId()
                        + " with " + volume.getCapacityBytes() + " bytes, " + PoolRequest.type(volume) + (volume.getEncrypted() ? ", encrypted" : "")
                        + ", in its " + PoolRequest.describe(PoolRequest.kindOf(volume)) + "; asked for " + wanted.capacityBytes() + " bytes, "
                        + wanted.pool().type() + (wanted.encrypted() ? ", encrypted" : "") + ", in the " + wanted.pool().describe());
            }
        }
        Placement.Placed placed = existing.isPresent() ? existing.get() : placement.create(wanted, wanted.requirements());
        return volume(placed.nodeId(), placed.volume());
    }

    /**
     * Where a copy's content is: the node whose pool holds the snapshot or the volume, and how that
     * node's agent names it. NOT_FOUND for an id this driver never handed out.
     */
    private record Origin(String nodeId, ContentSource source, String description) {

        Origin on(String holder) {
            return new Origin(holder, source, description);
        }

        static Origin of(VolumeContentSource source) {
            if (source.hasSnapshot()) {
                String id = source.getSnapshot().getSnapshotId();
                LocalSnapshotId snapshot = LocalSnapshotId.parse(id).orElseThrow(() ->
                        CsiException.notFound("snapshot " + CsiException.printable(id) + " does not exist"));
                return new Origin(snapshot.nodeId(), ContentSource.newBuilder().setSnapshot(snapshot.name()).build(), "snapshot " + id);
            }
            String id = source.getVolume().getVolumeId();
            LocalVolumeId volume = LocalVolumeId.parse(id).orElseThrow(() ->
                    CsiException.notFound("source volume " + CsiException.printable(id) + " does not exist"));
            return new Origin(volume.nodeId(), ContentSource.newBuilder().setVolume(volume.name()).build(), "volume " + id);
        }
    }

    /**
     * A volume restored from a snapshot or cloned from a volume: made on the node that holds the
     * source, by a copy in that node's pool, when the topology requirement allows that node.
     */
    private Volume createCopy(VolumeRequest asked, Origin named) throws Exception {
        var copying = copies.running(asked.name());
        if (copying.isPresent()) {
            return volume(copying.get().nodeId(), copying.get().volume());
        }
        // From the index: a retry finds the copy made also once its source is gone.
        Predicate<dev.strata.csi.agent.api.Volume> same = volume -> volume.getSource().equals(named.source())
                && asked.pool().sameType(volume) && asked.pool().holds(volume)
                && (asked.range().getRequiredBytes() == 0 || volume.getCapacityBytes() == asked.capacityBytes());
        var existing = placement.find(asked, same);
        if (existing.isPresent()) {
            dev.strata.csi.agent.api.Volume volume = existing.get().volume();
            if (!same.test(volume)) {
                throw CsiException.alreadyExists("volume " + asked.name() + " exists on node " + existing.get().nodeId()
                        + " with " + volume.getCapacityBytes() + " bytes, " + PoolRequest.type(volume) + ", in its "
                        + PoolRequest.describe(PoolRequest.kindOf(volume)) + ", other content, size or pool than "
                        + named.description() + ", " + asked.capacityBytes() + " bytes, " + asked.pool().type() + ", "
                        + asked.pool().describe());
            }
            if (!existing.get().nodeId().equals(named.nodeId())) {
                try {
                    copies.cleanUp(named.nodeId(), named.source(), asked.name()); // a copy that ended before its clean-up
                } catch (StatusRuntimeException e) {
                    // the source's agent removes a temporary snapshot at its next start
                }
            }
            return volume(existing.get().nodeId(), volume);
        }
        Origin origin = holder(named, asked);
        VolumeRequest wanted = asked.copying(sourceBytes(origin));
        if (!placement.allows(wanted.requirements(), origin.nodeId())) {
            return createOnAnotherNode(wanted, origin);
        }
        Placement.Placed placed = placement.createCopy(wanted, origin.nodeId(), origin.source());
        return volume(placed.nodeId(), placed.volume());
    }

    /**
     * A copy whose source lives on a node the topology requirement does not allow (with
     * WaitForFirstConsumer: the pod was scheduled elsewhere): made on the first allowed node with
     * room, its content streamed from the source's node through this controller ({@link CrossNodeCopies}).
     */
    private Volume createOnAnotherNode(VolumeRequest wanted, Origin origin) throws Exception {
        Placement.Placed placed = placement.place(wanted,
                nodeId -> copies.copy(origin.nodeId(), origin.source(), origin.description(), nodeId, wanted));
        return volume(placed.nodeId(), placed.volume());
    }

    /**
     * Where a snapshot's content is read from: a live node holding it complete, its own node or
     * one keeping a copy (docs/snapshot-copies.md). The node the topology names first wins when it
     * holds one (WaitForFirstConsumer: the pod's node, where the restore is then a copy in its
     * pool), then one the topology allows, its own node first. Its own node where no copy is live.
     */
    private Origin holder(Origin named, VolumeRequest asked) {
        if (!named.source().hasSnapshot()) {
            return named;
        }
        List<String> holders = snapshotCopies.holders(named.nodeId(), named.source().getSnapshot());
        if (holders.isEmpty() || holders.equals(List.of(named.nodeId()))) {
            return named;
        }
        Optional<String> first = placement.first(asked.requirements());
        if (first.isPresent() && holders.contains(first.get())) {
            return named.on(first.get());
        }
        return named.on(holders.stream().filter(nodeId -> placement.allows(asked.requirements(), nodeId)).findFirst()
                .orElse(holders.getFirst()));
    }

    /** The size of the copy's source; NOT_FOUND when its node never registered or its agent does not have it. */
    private long sourceBytes(Origin origin) {
        agents.requireKnown(origin.nodeId(), origin.description() + " does not exist: node " + origin.nodeId() + " has no agent");
        if (origin.source().hasVolume()) {
            return agents.stub(origin.nodeId()).getVolume(GetVolumeRequest.newBuilder().setName(origin.source().getVolume()).build()).getVolume().getCapacityBytes();
        }
        String name = origin.source().getSnapshot();
        var found = agents.index().snapshots(name).stream().filter(snapshot -> snapshot.nodeId().equals(origin.nodeId())).findFirst();
        if (found.isEmpty()) {
            agents.requireReported("whether " + origin.description() + " exists");
            throw CsiException.notFound(origin.description() + " does not exist");
        }
        return found.get().item().getCapacityBytes();
    }

    @Override
    public Optional<String> snapshotName(String snapshotId) {
        return LocalSnapshotId.parse(snapshotId).map(LocalSnapshotId::name);
    }

    /**
     * The source volume's node takes the snapshot into its pool. A snapshot of that name on another
     * node is another volume's (ALREADY_EXISTS): names are unique across the cluster, but for the
     * copies of this one. With the class's {@value LocalParameters#COPIES} above 1, the nodes to
     * keep copies are chosen and recorded with the snapshot on its node before any is made (a
     * snapshot taken already keeps the nodes it recorded), and the copies are made in the
     * background: ready_to_use is false until every one is complete (external-snapshotter asks again).
     */
    @Override
    public Snapshot createSnapshot(LocalVolumeId source, String name, Map<String, String> parameters) {
        LocalSnapshotId.checkName(name);
        LocalParameters.SNAPSHOT_CLASS.require(parameters);
        agents.requireKnown(source.nodeId(), "source volume " + source + " does not exist: node " + source.nodeId() + " has no agent");
        int wanted = snapshotCopies.wanted(parameters);
        var found = agents.index().snapshots(name);
        if (found.isEmpty()) {
            agents.requireReported("whether snapshot " + name + " exists");
        }
        Optional<dev.strata.csi.agent.api.Snapshot> taken = Optional.empty();
        for (var elsewhere : found) {
            if (elsewhere.nodeId().equals(source.nodeId())) {
                taken = Optional.of(elsewhere.item());
                continue;
            }
            if (elsewhere.item().getOriginNode().equals(source.nodeId())) {
                continue; // a copy of it
            }
            if (!elsewhere.made()) { // only its node's word: a node reporting the name first must not block it
                log.warn("a node reports a snapshot of the name this controller did not take there; ignored", "snapshot", name,
                        "node", elsewhere.nodeId(), "source", source);
                continue;
            }
            throw CsiException.alreadyExists("snapshot " + name + " exists on node " + elsewhere.nodeId()
                    + ", of another volume than " + source);
        }
        CreateSnapshotRequest.Builder take = CreateSnapshotRequest.newBuilder().setName(name).setSourceVolume(source.name());
        if (wanted > 1 && taken.isEmpty()) {
            dev.strata.csi.agent.api.Volume volume = get(source);
            take.addAllCopyNodes(snapshotCopies.choose(source.nodeId(), source.name(), volume.getCapacityBytes(), volume.getPool(), wanted - 1));
        }
        // The agent freezes the volume's filesystem and copies it: on a busy node that waits as long as a group's freeze may.
        var answered = agents.stub(source.nodeId(), GroupSnapshots.FREEZE_DEADLINE).createSnapshot(take.build());
        agents.index().snapshot(source.nodeId(), name, answered.getSnapshot(), answered.getGeneration());
        dev.strata.csi.agent.api.Snapshot snapshot = answered.getSnapshot();
        if (wanted > 1 && snapshot.getCopyNodesCount() == 0) {
            throw CsiException.failedPrecondition("snapshot " + name + " was taken on node " + source.nodeId() + " without copies"
                    + (take.getCopyNodesCount() > 0 ? ": its node-server records no copy nodes (too old for the parameter " + LocalParameters.COPIES + ")"
                    : ", before; its class now asks for " + wanted));
        }
        if (snapshot.getCopyNodesCount() == 0) {
            return snapshot(source.nodeId(), snapshot, true);
        }
        crashes.reach(LocalCrashPoint.COPY_PLANNED);
        return snapshot(source.nodeId(), snapshot, snapshotCopies.ensure(source.nodeId(), snapshot));
    }

    /**
     * Deletes the snapshot on its own node and every copy ({@link SnapshotCopies#delete}); a node
     * that never registered (or was removed) holds nothing.
     */
    @Override
    public void deleteSnapshot(String snapshotId) {
        Optional<LocalSnapshotId> id = LocalSnapshotId.parse(snapshotId);
        if (id.isEmpty()) {
            return;
        }
        String origin = id.get().nodeId();
        String name = id.get().name();
        Optional<dev.strata.csi.agent.api.Snapshot> recorded = snapshotCopies.recorded(origin, name);
        if (recorded.isEmpty() && agents.index().copiesOf(origin, name).isEmpty() && agents.index().tombstones(name).isEmpty()) {
            // Neither it nor a copy is known: its node may still have it (not reported yet, or a temporary snapshot).
            try {
                agents.requireKnown(origin, "node " + origin + " has no agent");
            } catch (CsiException e) {
                if (e.code() == Status.Code.NOT_FOUND) {
                    return;
                }
                throw e;
            }
        }
        snapshotCopies.delete(origin, name, recorded);
    }

    /**
     * A page of the snapshots of every node that registered, from the index: no node is asked, and
     * a page costs its own size (a filter by snapshot or source volume, one node's snapshots).
     * UNAVAILABLE while a node that could hold them has not reported, rather than a list without them.
     * A snapshot with copies on other nodes is listed once, as its own node has it; once that node
     * no longer reports it (gone, or its pool lost), as a live copy has it, under the same id.
     */
    @Override
    public List<Snapshot> snapshots(SnapshotFilter filter, String fromId, int limit) {
        if (!filter.snapshotId().isEmpty()) {
            Optional<LocalSnapshotId> id = LocalSnapshotId.parse(filter.snapshotId());
            if (id.isEmpty()) {
                return List.of(); // no snapshot of this backend has it
            }
            var found = original(id.get().nodeId(), id.get().name()).or(() -> fromCopy(id.get().nodeId(), id.get().name()));
            if (found.isEmpty()) {
                agents.requireReported(id.get().nodeId(), "whether snapshot " + id.get() + " exists");
            }
            return found.stream()
                    .filter(snapshot -> filter.matches(snapshot) && snapshot.getSnapshotId().compareTo(fromId) >= 0).toList();
        }
        if (!filter.sourceVolumeId().isEmpty()) {
            Optional<LocalVolumeId> source = LocalVolumeId.parse(filter.sourceVolumeId());
            if (source.isEmpty()) {
                return List.of();
            }
            String nodeId = source.get().nodeId();
            agents.requireReported(nodeId, "the snapshots of volume " + source.get());
            List<Snapshot> originals = agents.index().snapshotsOf(nodeId).stream() // in name order: the order of the ids
                    .filter(snapshot -> snapshot.getOriginNode().isEmpty() && snapshot.getSourceVolume().equals(source.get().name())
                            && !snapshotCopies.deleted(snapshot.getName()))
                    .map(snapshot -> snapshot(nodeId, snapshot, snapshotCopies.ready(nodeId, snapshot)))
                    .toList();
            List<Snapshot> fromCopies = agents.index().copiedFrom(nodeId + "/", Integer.MAX_VALUE).stream()
                    .takeWhile(key -> key.originNode().equals(nodeId))
                    .flatMap(key -> orphan(key).stream())
                    .filter(snapshot -> snapshot.getSourceVolumeId().equals(source.get().toString()))
                    .toList();
            return merged(originals, fromCopies, Integer.MAX_VALUE).stream()
                    .filter(snapshot -> snapshot.getSnapshotId().compareTo(fromId) >= 0)
                    .limit(limit)
                    .toList();
        }
        agents.requireReported("every snapshot");
        return indexFrom(fromId, LocalSnapshotId.PREFIX).map(from -> merged(originalsFrom(from, limit), orphansFrom(from, limit), limit))
                .orElse(List.of());
    }

    /** The snapshot as the node that took it reports it. */
    private Optional<Snapshot> original(String nodeId, String name) {
        return snapshotCopies.recorded(nodeId, name).filter(snapshot -> !snapshotCopies.deleted(name))
                .map(snapshot -> snapshot(nodeId, snapshot, snapshotCopies.ready(nodeId, snapshot)));
    }

    /** The snapshot as a copy has it, a live one first; empty when none is reported, or it is deleted (a copy on a node back from down). */
    private Optional<Snapshot> fromCopy(String origin, String name) {
        if (snapshotCopies.deleted(name)) {
            return Optional.empty();
        }
        var copies = agents.index().copiesOf(origin, name);
        return copies.stream().filter(copy -> agents.live(copy.nodeId()).isPresent()).findFirst()
                .or(() -> copies.stream().findFirst())
                .map(copy -> snapshot(origin, copy.item(), true));
    }

    /** A snapshot whose own node no longer reports it, from a copy; empty while its node does. */
    private Optional<Snapshot> orphan(VolumeIndex.SnapshotKey key) {
        return original(key.originNode(), key.name()).isPresent() ? Optional.empty() : fromCopy(key.originNode(), key.name());
    }

    /** At most {@code limit} snapshots as the nodes that took them report them, in id order from {@code from}: copies left out. */
    private List<Snapshot> originalsFrom(String from, int limit) {
        List<Snapshot> page = new ArrayList<>();
        String cursor = from;
        while (page.size() < limit) {
            var read = agents.index().snapshotsFrom(cursor, limit);
            for (var found : read) {
                if (found.item().getOriginNode().isEmpty() && page.size() < limit && !snapshotCopies.deleted(found.item().getName())) {
                    page.add(snapshot(found.nodeId(), found.item(), snapshotCopies.ready(found.nodeId(), found.item())));
                }
            }
            if (read.size() < limit) {
                break;
            }
            cursor = read.getLast().nodeId() + "/" + read.getLast().item().getName() + "\0"; // just after the last read
        }
        return page;
    }

    /** At most {@code limit} snapshots whose own node no longer reports them, from copies, in id order from {@code from}. */
    private List<Snapshot> orphansFrom(String from, int limit) {
        List<Snapshot> page = new ArrayList<>();
        String cursor = from;
        while (page.size() < limit) {
            var read = agents.index().copiedFrom(cursor, limit);
            for (var key : read) {
                if (page.size() < limit) {
                    orphan(key).ifPresent(page::add);
                }
            }
            if (read.size() < limit) {
                break;
            }
            cursor = read.getLast().originNode() + "/" + read.getLast().name() + "\0";
        }
        return page;
    }

    /** Two lists in id order as one, at most {@code limit} long. */
    private static List<Snapshot> merged(List<Snapshot> one, List<Snapshot> other, int limit) {
        List<Snapshot> all = new ArrayList<>(one);
        all.addAll(other);
        all.sort(Comparator.comparing(Snapshot::getSnapshotId));
        return all.size() <= limit ? all : all.subList(0, limit);
    }

    /**
     * Where in the index's {@code <node>/<name>} order a page from the id {@code fromId} starts, for
     * ids that begin with {@code prefix}; empty when every such id sorts before it.
     */
    private static Optional<String> indexFrom(String fromId, String prefix) {
        if (fromId.compareTo(prefix) <= 0) {
            return Optional.of("");
        }
        return fromId.startsWith(prefix) ? Optional.of(fromId.substring(prefix.length())) : Optional.empty();
    }

    /**
     * The CSI snapshot of an agent's. The agent reports a snapshot only once complete; a member of a
     * group snapshot is ready once its group is committed (every member taken).
     */
    static Snapshot snapshot(String nodeId, dev.strata.csi.agent.api.Snapshot snapshot) {
        return snapshot(nodeId, snapshot, true);
    }

    /** As {@link #snapshot(String, dev.strata.csi.agent.api.Snapshot)}, ready only with {@code copiesComplete}; {@code nodeId} the node that took it. */
    static Snapshot snapshot(String nodeId, dev.strata.csi.agent.api.Snapshot snapshot, boolean copiesComplete) {
        Snapshot.Builder csi = Snapshot.newBuilder()
                .setSnapshotId(new LocalSnapshotId(nodeId, snapshot.getName()).toString())
                .setSourceVolumeId(new LocalVolumeId(nodeId, snapshot.getSourceVolume()).toString())
                .setSizeBytes(snapshot.getCapacityBytes())
                .setCreationTime(snapshot.getCreationTime())
                .setReadyToUse(copiesComplete && (!snapshot.hasGroup() || snapshot.getGroup().getCommitted()));
        if (snapshot.hasGroup()) {
            csi.setGroupSnapshotId(new GroupSnapshotId(snapshot.getGroup().getName()).toString());
        }
        return csi.build();
    }

    @Override
    public void delete(LocalVolumeId id) {
        var deleted = agents.stub(id.nodeId()).deleteVolume(DeleteVolumeRequest.newBuilder().setName(id.name()).build());
        agents.index().volume(id.nodeId(), id.name(), null, deleted.getGeneration());
    }

    /** Attaches the volume on its node (a loop device, or the logical volume activated): only there, since the data is there. */
    @Override
    public Map<String, String> publish(LocalVolumeId id, String nodeId, VolumeCapability capability) {
        if (!id.nodeId().equals(nodeId)) {
            get(id); // NOT_FOUND comes first for a volume that does not exist
            throw CsiException.failedPrecondition("volume " + id + " holds its data on node " + id.nodeId()
                    + " and cannot be attached to node " + nodeId);
        }
        dev.strata.csi.agent.api.Volume volume = agents.stub(id.nodeId()).attachVolume(AttachVolumeRequest.newBuilder()
                .setName(id.name()).setNodeId(nodeId).build()).getVolume();
        return Map.of(DEVICE_PATH, volume.getDevicePath());
    }

    /** A node the volume never lived on: it is not published there. */
    @Override
    public void unpublish(LocalVolumeId id, String nodeId) {
        if (nodeId.isEmpty() || nodeId.equals(id.nodeId())) {
            agents.stub(id.nodeId()).detachVolume(DetachVolumeRequest.newBuilder()
                    .setName(id.name()).setNodeId(id.nodeId()).build());
        }
    }

    /**
     * Grows the volume on its node, to whole MiB as volumes are made; the agent grows its device
     * too when attached. A filesystem then grows on the node; a raw block device needs nothing more.
     */
    @Override
    public Expansion expand(LocalVolumeId id, long bytes, Optional<VolumeCapability> capability) {
        long size = Math.ceilDiv(bytes, VolumeRequest.MIB) * VolumeRequest.MIB;
        dev.strata.csi.agent.api.Volume volume = agents.stub(id.nodeId()).expandVolume(ExpandVolumeRequest.newBuilder()
                .setName(id.name()).setCapacityBytes(size).build()).getVolume();
        boolean block = capability.map(LocalCapabilities::isBlock).orElse(false);
        return new Expansion(volume.getCapacityBytes(), !block);
    }

    @Override
    public void checkMutableParameters(Map<String, String> parameters) {
        RequestKeys.mutable(parameters);
    }

    /**
     * Records the IO limits the parameters name with the volume, through its node's agent, which
     * applies them at once to the pods the volume is published to. No limit named: the agent still
     * says whether the volume exists (NOT_FOUND).
     */
    @Override
    public void modify(LocalVolumeId id, Map<String, String> parameters) {
        var limits = RequestKeys.mutable(parameters);
        agents.requireKnown(id.nodeId(), "volume " + id + " does not exist: node " + id.nodeId() + " has no agent");
        setIoLimits(id, limits);
    }

    private void setIoLimits(LocalVolumeId id, IoLimits limits) {
        agents.stub(id.nodeId()).setIoLimits(SetIoLimitsRequest.newBuilder().setName(id.name()).setIoLimits(limits).build());
    }

    @Override
    public Optional<String> validate(LocalVolumeId id, Map<String, String> parameters) {
        get(id);
        return VolumeRequest.parameterProblem(parameters);
    }

    /**
     * The volumes of every node that registered, from the index: no node is asked. A node with a
     * live lease that has not reported fails the call (UNAVAILABLE) rather than leaving its volumes
     * out: the external-attacher reads a missing volume as a detached one.
     */
    @Override
    public List<ListVolumesResponse.Entry> list() {
        return list("", Integer.MAX_VALUE);
    }

    private ListVolumesResponse.Entry entry(String nodeId, dev.strata.csi.agent.api.Volume volume) {
        return ListVolumesResponse.Entry.newBuilder()
                .setVolume(Volume.newBuilder()
                        .setVolumeId(new LocalVolumeId(nodeId, volume.getName()).toString())
                        .setCapacityBytes(volume.getCapacityBytes())
                        .addAccessibleTopology(topology.of(nodeId)))
                .setStatus(ListVolumesResponse.VolumeStatus.newBuilder()
                        .addAllPublishedNodeIds(volume.getPublishedNodeIdsList()))
                .build();
    }

    /** A page of {@link #list()}, from the index's order: it costs the page, not every volume. */
    @Override
    public List<ListVolumesResponse.Entry> list(String fromId, int limit) {
        agents.requireReported("every volume");
        return indexFrom(fromId, LocalVolumeId.PREFIX).map(from -> agents.index().volumesFrom(from, limit).stream()
                .map(found -> entry(found.nodeId(), found.item())).toList()).orElse(List.of());
    }

    /**
     * From the index: no node is asked. UNAVAILABLE while the volume's node may still report it
     * (this controller just started, or its agent has not sent everything); NOT_FOUND is sure.
     */
    @Override
    public Optional<ListVolumesResponse.Entry> get(LocalVolumeId id, String volumeId) {
        var found = agents.index().volumes(id.name()).stream().filter(volume -> volume.nodeId().equals(id.nodeId())).findFirst();
        if (found.isEmpty()) {
            agents.requireReported(id.nodeId(), "whether volume " + id + " exists");
        }
        return found.map(volume -> entry(id.nodeId(), volume.item()));
    }

    /**
     * What a volume of the StorageClass (its pool, and for LVM its lvType and thinOvercommit) can
     * get on the node the topology names, 0 on a node without that pool; without topology the
     * emptiest node's, since a volume lives on one node.
     */
    @Override
    public long availableBytes(GetCapacityRequest request) {
        PoolRequest pool = PoolRequest.of(request.getParametersMap());
        if (request.hasAccessibleTopology()) {
            return topology.nodeOf(request.getAccessibleTopology())
                    .flatMap(nodeId -> agents.poolOf(nodeId, pool.kind())) // empty: no node with an agent, or without the pool
                    .map(pool::available)
                    .orElse(0L);
        }
        var emptiest = agents.emptiestFirst().findFirst();
        if (emptiest.isEmpty() && (agents.settling() || !agents.registered().isEmpty())) {
            throw CsiException.unavailable("no node agent has a current lease: they have not registered since "
                    + "controller-server started, or are restarting");
        }
        if (pool.kind() == PoolKind.POOL_IMAGE) { // the directory keeps agents in the order of this pool's room
            return emptiest.map(agent -> agent.pool().getAvailableBytes()).orElse(0L);
        }
        return agents.live().stream().flatMap(agent -> pool.available(agent).stream()).mapToLong(Long::longValue).max().orElse(0);
    }

    /** The agent's volume; NOT_FOUND when its node never registered or its agent does not have it. */
    private dev.strata.csi.agent.api.Volume get(LocalVolumeId id) {
        agents.requireKnown(id.nodeId(), "volume " + id + " does not exist: node " + id.nodeId() + " has no agent");
        return agents.stub(id.nodeId()).getVolume(GetVolumeRequest.newBuilder().setName(id.name()).build()).getVolume();
    }

    private Volume volume(String nodeId, dev.strata.csi.agent.api.Volume volume) {
        // The content source is not set here: ControllerService echoes the request's.
        Map<String, String> context = new TreeMap<>();
        PoolRequest.putContext(volume, context);
        return Volume.newBuilder()
                .setVolumeId(new LocalVolumeId(nodeId, volume.getName()).toString())
                .setCapacityBytes(volume.getCapacityBytes())
                .addAccessibleTopology(topology.of(nodeId))
                .putAllVolumeContext(context)
                .build();
    }
}
