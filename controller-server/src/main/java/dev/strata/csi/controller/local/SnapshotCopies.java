package dev.strata.csi.controller.local;

import com.google.protobuf.Timestamp;
import dev.strata.csi.agent.api.DeleteSnapshotRequest;
import dev.strata.csi.agent.api.DeleteSnapshotResponse;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyRequest;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.SnapshotTombstone;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.controller.agents.VolumeIndex;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.StatusRuntimeException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Stream;

/**
 * A snapshot's copies in the pools of other nodes (the VolumeSnapshotClass parameter
 * {@value LocalParameters#COPIES}, docs/snapshot-copies.md), so that it outlives the node that
 * took it. The nodes to keep them are chosen when the snapshot is taken and recorded with it on
 * its node (Snapshot.copy_nodes): every retry, and a controller restarted meanwhile, copies to the
 * same nodes. Each copy is relayed in the background ({@link Transfers}, keyed by snapshot and
 * node), outliving the CreateSnapshot call; the snapshot is ready once every copy node reports its
 * copy complete (its agent lists a copy only once its digest matched). A node that already holds
 * a complete copy of an earlier snapshot of the same volume gets only what changed since.
 *
 * <p>Nothing is kept here that a restart would need: what is planned is on the snapshot's node,
 * what is complete in the copy nodes' reports. A pass every {@link #RECONCILE_EVERY} starts the
 * copies no call is waiting for (after a restart, or a node that was down).
 */
final class SnapshotCopies {

    static final Duration RECONCILE_EVERY = Duration.ofSeconds(30);
    /** How long a deletion waits for a node that answers ABORTED (its end of a stopped copy still closing). */
    private static final Duration BUSY_WAIT = Duration.ofSeconds(10);

    private static final Comparator<Timestamp> TAKEN = Comparator.comparingLong(Timestamp::getSeconds).thenComparingInt(Timestamp::getNanos);

    private final AgentDirectory agents;
    private final ContentRelay relay;
    private final Crashes<LocalCrashPoint> crashes;
    private final Clock clock;
    private final Log log;
    private final Transfers<Snapshot> transfers = new Transfers<>();
    /** Snapshots a DeleteSnapshot is deleting: no copy of them is started meanwhile. */
    private final Set<String> deleting = java.util.concurrent.ConcurrentHashMap.newKeySet();

    SnapshotCopies(AgentDirectory agents, ContentRelay relay, Crashes<LocalCrashPoint> crashes, Clock clock, Log log) {
        this.agents = agents;
        this.relay = relay;
        this.crashes = crashes;
        this.clock = clock;
        this.log = log;
    }

    /**
     * How many copies the class asks for, the snapshot on its own node counted: 1 without the
     * parameter; INVALID_ARGUMENT for anything but a whole number from 1 to the number of
     * registered nodes with a local pool.
     */
    int wanted(Map<String, String> parameters) {
        int copies = LocalParameters.copies(parameters);
        long nodes = agents.registered().stream()
                .filter(agent -> agent.pool(PoolKind.POOL_IMAGE).isPresent() || agent.pool(PoolKind.POOL_LVM).isPresent())
                .count();
        if (copies < 1 || copies > nodes) {
            throw CsiException.invalidArgument("VolumeSnapshotClass parameter " + LocalParameters.COPIES + " is " + copies
                    + ": it must be from 1 (the snapshot's own node only) to the number of nodes with a local pool, " + nodes
                    + " registered now");
        }
        return copies;
    }

    /**
     * {@code count} live nodes other than {@code origin} to keep copies of a snapshot of {@code
     * volume}: those with room for it, first those already holding a complete copy of an earlier
     * snapshot of the volume (their copy is sent incrementally), then by node id, so that the same
     * cluster gives the same choice. RESOURCE_EXHAUSTED when fewer have room.
     */
    List<String> choose(String origin, String volume, long bytes, PoolKind pool, int count) {
        record Candidate(String nodeId, boolean holdsEarlier) {}
        List<String> refusals = new ArrayList<>();
        List<Candidate> candidates = new ArrayList<>();
        for (AgentDirectory.Agent agent : agents.live()) {
            if (agent.nodeId().equals(origin)) {
                continue;
            }
            if (!agents.answering(agent.nodeId())) {
                refusals.add(agent.nodeId() + ": its agent does not answer");
                continue;
            }
            long room = agent.pool(poolOn(agent, pool)).map(status -> status.getAvailableBytes()).orElse(0L);
            if (room < bytes) {
                refusals.add(agent.nodeId() + ": " + room + " bytes available");
                continue;
            }
            boolean holdsEarlier = agents.index().snapshotsOf(agent.nodeId()).stream()
                    .anyMatch(copy -> copy.getOriginNode().equals(origin) && copy.getSourceVolume().equals(volume));
            candidates.add(new Candidate(agent.nodeId(), holdsEarlier));
        }
        if (candidates.size() < count) {
            throw CsiException.resourceExhausted("snapshot copies: " + count + " other node(s) with " + bytes
                    + " bytes of room wanted, " + candidates.size() + " found" + (refusals.isEmpty() ? "" : ": " + String.join("; ", refusals)));
        }
        return candidates.stream()
                .sorted(Comparator.comparing((Candidate candidate) -> !candidate.holdsEarlier()).thenComparing(Candidate::nodeId))
                .limit(count).map(Candidate::nodeId).toList();
    }

    /** The pool a copy goes into on a node: the source volume's kind where the node has it, else its image pool. */
    private static PoolKind poolOn(AgentDirectory.Agent agent, PoolKind pool) {
        return pool == PoolKind.POOL_LVM && agent.pool(PoolKind.POOL_LVM).isPresent() ? PoolKind.POOL_LVM : PoolKind.POOL_IMAGE;
    }

    /**
     * Whether every node {@code snapshot} (as its node {@code origin} records it) names holds its
     * copy complete; the copies that are not are started, or left running, in the background.
     */
    boolean ensure(String origin, Snapshot snapshot) {
        boolean ready = true;
        for (String target : snapshot.getCopyNodesList()) {
            if (!complete(origin, snapshot.getName(), target)) {
                ready = false;
                start(origin, snapshot, target);
            }
        }
        return ready;
    }

    /** Whether every copy the snapshot records is complete, as the copy nodes report; without starting any. */
    boolean ready(String origin, Snapshot snapshot) {
        return snapshot.getCopyNodesList().stream().allMatch(target -> complete(origin, snapshot.getName(), target));
    }

    private boolean complete(String origin, String name, String target) {
        return agents.index().copiesOf(origin, name).stream().anyMatch(copy -> copy.nodeId().equals(target));
    }

    private static String key(String name, String target) {
        return name + "@" + target; // '@' is in no snapshot name
    }

    private void start(String origin, Snapshot snapshot, String target) {
        String name = snapshot.getName();
        if (agents.live(target).isEmpty() || transfers.running(key(name, target)) || deleting.contains(name)) {
            return;
        }
        Optional<String> holder = holder(origin, name);
        if (holder.isEmpty()) {
            return; // no live node holds it now: a later call or pass copies it
        }
        transfers.startIfIdle(key(name, target), target, "copying snapshot " + name + " from node " + holder.get(),
                progress -> copy(holder.get(), origin, snapshot, target, progress));
    }

    /** Whether the snapshot {@code name} is deleted, though a node that was down may still report it or a copy: a tombstone names it. */
    boolean deleted(String name) {
        return !agents.index().tombstones(name).isEmpty();
    }

    /** The snapshot {@code name} as {@code origin}, the node that took it, reports it (with the copy nodes it recorded). */
    Optional<Snapshot> recorded(String origin, String name) {
        return agents.index().snapshots(name).stream()
                .filter(located -> located.nodeId().equals(origin) && located.item().getOriginNode().isEmpty())
                .map(VolumeIndex.Located::item).findFirst();
    }

    /** A live node that holds the snapshot complete: its own node first, else one with a copy. */
    Optional<String> holder(String origin, String name) {
        return holders(origin, name).stream().findFirst();
    }

    /** The live nodes that hold the snapshot complete and answer: its own node first, then those with a copy. */
    List<String> holders(String origin, String name) {
        if (deleted(name)) {
            return List.of();
        }
        List<String> holders = new ArrayList<>();
        if (recorded(origin, name).isPresent()) {
            holders.add(origin);
        }
        agents.index().copiesOf(origin, name).forEach(copy -> holders.add(copy.nodeId()));
        return holders.stream().filter(nodeId -> agents.live(nodeId).isPresent() && agents.answering(nodeId)).toList();
    }

    private Snapshot copy(String holder, String origin, Snapshot snapshot, String target, java.util.concurrent.atomic.AtomicLong progress)
            throws InterruptedException {
        String name = snapshot.getName();
        String base = base(holder, origin, snapshot, target).orElse("");
        PoolKind pool = agents.live(target).map(agent -> poolOn(agent, sourcePool(origin, snapshot))).orElse(PoolKind.POOL_IMAGE);
        long started = System.nanoTime();
        log.info("snapshot copy started", "snapshot", name, "origin", origin, "from", holder, "to", target,
                "base_snapshot", base.isEmpty() ? "(none: the whole content)" : base);
        try {
            ContentRelay.SnapshotCopy copied = relay.copySnapshot(agent(holder), agent(target), ReceiveSnapshotCopyRequest.newBuilder()
                    .setName(name).setOriginNode(origin).setSnapshot(snapshot.toBuilder().clearOriginNode())
                    .setPool(pool).setBaseSnapshot(base).build(), progress);
            if (copied.generation() >= 0) {
                crashes.reach(LocalCrashPoint.COPY_RELAYED);
            }
            agents.index().snapshot(target, name, copied.snapshot(), copied.generation());
            log.info("snapshot copy complete", "snapshot", name, "origin", origin, "from", holder, "to", target,
                    "base_snapshot", copied.base(), "resumed_at", copied.resumedAt(), "data_bytes", progress.get(),
                    "seconds", String.format("%.1f", (System.nanoTime() - started) / 1e9));
            return copied.snapshot();
        } catch (StatusRuntimeException | CsiException e) {
            if (deleting.contains(name)) {
                log.info("snapshot copy stopped: the snapshot is being deleted", "snapshot", name, "to", target);
            } else {
                log.warn("snapshot copy failed; the next CreateSnapshot call or reconcile pass resumes it", "snapshot", name,
                        "origin", origin, "from", holder, "to", target, "data_bytes", progress.get(), "reason", reason(e));
            }
            throw e;
        }
    }

    private static void sleep(Duration pause) {
        try {
            Thread.sleep(pause);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw CsiException.aborted("interrupted while waiting for a node to finish a snapshot copy; retry");
        }
    }

    private static String reason(RuntimeException e) {
        return e instanceof StatusRuntimeException status
                ? status.getStatus().getCode() + ": " + status.getStatus().getDescription() : e.getMessage();
    }

    /** The pool of the snapshot's source volume on its node, as the index has it; the image pool once the volume is gone. */
    private PoolKind sourcePool(String origin, Snapshot snapshot) {
        return agents.index().volumes(snapshot.getSourceVolume()).stream().filter(volume -> volume.nodeId().equals(origin))
                .map(volume -> volume.item().getPool()).findFirst().orElse(PoolKind.POOL_IMAGE);
    }

    /**
     * The latest snapshot of the same volume, taken before this one, that {@code target} holds a
     * complete copy of and {@code holder} still has: the copy is built on it, and only what
     * changed since is sent.
     */
    private Optional<String> base(String holder, String origin, Snapshot snapshot, String target) {
        Set<String> onHolder = new LinkedHashSet<>();
        agents.index().snapshotsOf(holder).forEach(held -> onHolder.add(held.getName()));
        return agents.index().snapshotsOf(target).stream()
                .filter(copy -> copy.getOriginNode().equals(origin) && copy.getSourceVolume().equals(snapshot.getSourceVolume())
                        && !copy.getName().equals(snapshot.getName()) && onHolder.contains(copy.getName())
                        && TAKEN.compare(copy.getCreationTime(), snapshot.getCreationTime()) < 0)
                .max(Comparator.comparing(Snapshot::getCreationTime, TAKEN))
                .map(Snapshot::getName);
    }

    /**
     * Deletes the snapshot {@code name} that {@code origin} took, and every copy of it: on the
     * nodes its record names ({@code recorded}, while its node still reports it), wherever a copy
     * is reported, and on the nodes an earlier call's tombstone names. Running transfers of it are
     * stopped first. A node that is down keeps its copy for now: one live node that held the
     * snapshot (one keeping a tombstone of it already, else its own node, else a copy node) keeps a
     * tombstone naming the down nodes, in its pool and its inventory, deleted last, and
     * {@link #reconcile} deletes their copies when they come back. UNAVAILABLE only when no node
     * that held it is live to keep the tombstone. Nothing is deleted on a node that was never
     * told of the snapshot, and a removed node ({@link AgentDirectory#removed}) is not waited for.
     */
    void delete(String origin, String name, Optional<Snapshot> recorded) {
        deleting.add(name);
        try {
            deleteEverywhere(origin, name, recorded);
        } finally {
            deleting.remove(name);
        }
    }

    private void deleteEverywhere(String origin, String name, Optional<Snapshot> recorded) {
        Set<String> holders = new TreeSet<>();
        holders.add(origin);
        recorded.ifPresent(snapshot -> holders.addAll(snapshot.getCopyNodesList()));
        agents.index().copiesOf(origin, name).forEach(copy -> holders.add(copy.nodeId()));
        var tombstones = agents.index().tombstones(name);
        tombstones.forEach(tombstone -> holders.addAll(tombstone.item().getNodesList()));
        holders.forEach(nodeId -> transfers.stop(key(name, nodeId)));
        List<String> live = new ArrayList<>();
        List<String> down = new ArrayList<>();
        for (String nodeId : holders) {
            if (agents.live(nodeId).isPresent()) {
                live.add(nodeId);
            } else if (!agents.removed(nodeId)) {
                down.add(nodeId);
            }
        }
        List<String> keepers = new ArrayList<>();
        tombstones.forEach(tombstone -> keepers.add(tombstone.nodeId()));
        keepers.add(origin);
        keepers.addAll(live);
        Optional<String> keeper = keepers.stream().filter(nodeId -> agents.live(nodeId).isPresent()).findFirst();
        if (keeper.isEmpty()) {
            if (down.isEmpty()) {
                return; // every node that held it is removed: nothing is left anywhere
            }
            throw CsiException.unavailable("snapshot " + name + " cannot be deleted now: every node that holds it or a copy ("
                    + String.join(", ", down) + ") is down, and none is live to keep the record of its deletion; retried");
        }
        for (String nodeId : live) {
            if (!nodeId.equals(keeper.get())) {
                deleteOn(nodeId, name, origin, List.of());
                if (!nodeId.equals(origin)) {
                    crashes.reach(LocalCrashPoint.COPY_REMOTE_DELETED);
                }
            }
        }
        for (var tombstone : tombstones) { // an earlier call's, on another node than the keeper
            if (!tombstone.nodeId().equals(keeper.get()) && agents.live(tombstone.nodeId()).isPresent() && !live.contains(tombstone.nodeId())) {
                deleteOn(tombstone.nodeId(), name, origin, List.of());
            }
        }
        deleteOn(keeper.get(), name, origin, down);
        if (!down.isEmpty()) {
            log.info("snapshot deleted; its copies on nodes that are down are deleted when they come back", "snapshot", name,
                    "origin", origin, "down", String.join(",", down), "tombstone_on", keeper.get());
        }
    }

    /** DeleteSnapshot on {@code nodeId}: the snapshot or copy gone there, and its tombstone naming {@code down} (none: no tombstone). */
    private void deleteOn(String nodeId, String name, String origin, List<String> down) {
        DeleteSnapshotRequest request = DeleteSnapshotRequest.newBuilder().setName(name)
                .addAllTombstoneNodes(down).setOriginNode(down.isEmpty() ? "" : origin).build();
        DeleteSnapshotResponse deleted;
        long until = System.nanoTime() + BUSY_WAIT.toNanos();
        while (true) {
            try {
                deleted = agents.stub(nodeId).deleteSnapshot(request);
                break;
            } catch (StatusRuntimeException e) {
                // A copy's receive just stopped holds the name on its node until its stream is closed there.
                if (e.getStatus().getCode() != io.grpc.Status.Code.ABORTED || System.nanoTime() > until) {
                    throw e;
                }
                sleep(Duration.ofMillis(100));
            }
        }
        agents.index().snapshot(nodeId, name, null, deleted.getGeneration());
        agents.index().tombstone(nodeId, name, down.isEmpty() ? null
                : SnapshotTombstone.newBuilder().setName(name).setOriginNode(origin).addAllNodes(down).build(), deleted.getGeneration());
        if (!nodeId.equals(origin)) {
            log.info("snapshot copy deleted", "snapshot", name, "origin", origin, "node", nodeId);
        }
    }

    /**
     * Deletes the copies that tombstones name on nodes that are back (or drops removed nodes from
     * them), then the tombstone, or what is left of it, on its node: a node that comes back never
     * keeps a copy of a deleted snapshot. {@code only}: the tombstones that name or are kept by the
     * node that just reported; empty: every one.
     */
    void reconcileTombstones(Optional<String> only) {
        for (var tombstone : agents.index().tombstones()) {
            SnapshotTombstone kept = tombstone.item();
            boolean concerned = only.isEmpty() || kept.getNodesList().contains(only.get()) || tombstone.nodeId().equals(only.get());
            if (!concerned || agents.live(tombstone.nodeId()).isEmpty()) {
                continue;
            }
            List<String> left = new ArrayList<>();
            for (String nodeId : kept.getNodesList()) {
                if (agents.live(nodeId).isPresent()) {
                    deleteOn(nodeId, kept.getName(), kept.getOriginNode(), List.of());
                    crashes.reach(LocalCrashPoint.COPY_REMOTE_DELETED);
                    log.info("deleted snapshot's copy removed from a node back from down", "snapshot", kept.getName(), "node", nodeId);
                } else if (!agents.removed(nodeId)) {
                    left.add(nodeId);
                }
            }
            if (!left.equals(kept.getNodesList())) {
                deleteOn(tombstone.nodeId(), kept.getName(), kept.getOriginNode(), left);
            }
        }
    }

    /**
     * Starts the copies of every snapshot whose copies are not complete and that no call is
     * copying: after a restart of this controller, or once a node that was down is back.
     */
    void reconcile() {
        try {
            reconcileTombstones(Optional.empty());
        } catch (RuntimeException e) {
            log.warn("cannot delete the copies of deleted snapshots on nodes back from down", "reason", reason(e));
        }
        planned().forEach(planned -> {
            try {
                ensure(planned.origin(), planned.snapshot());
            } catch (RuntimeException e) {
                log.warn("cannot start a snapshot copy", "snapshot", planned.snapshot().getName(), "reason", e.getMessage());
            }
        });
    }

    /** A snapshot on the node that took it, with copies recorded. */
    private record Planned(String origin, Snapshot snapshot) {}

    private Stream<Planned> planned() {
        return agents.index().snapshotsFrom("", Integer.MAX_VALUE).stream()
                .filter(located -> located.item().getOriginNode().isEmpty() && located.item().getCopyNodesCount() > 0)
                .map(located -> new Planned(located.nodeId(), located.item()));
    }

    /** The copies not complete yet, with their age since their snapshot was taken. */
    Stream<RelayMetrics.Unready> unready() {
        long now = clock.millis();
        return planned().flatMap(planned -> planned.snapshot().getCopyNodesList().stream()
                .filter(target -> !complete(planned.origin(), planned.snapshot().getName(), target))
                .map(target -> new RelayMetrics.Unready(planned.snapshot().getName(), target,
                        (now - planned.snapshot().getCreationTime().getSeconds() * 1000) / 1e3)));
    }

    private ContentRelay.Agent agent(String nodeId) {
        return new ContentRelay.Agent(nodeId, agents.streamStub(nodeId), agents.stub(nodeId));
    }
}
