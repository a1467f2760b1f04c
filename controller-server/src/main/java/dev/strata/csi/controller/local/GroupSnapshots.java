package dev.strata.csi.controller.local;

import com.google.protobuf.Timestamp;
import csi.v1.Csi.VolumeGroupSnapshot;
import dev.strata.csi.agent.api.CommitVolumeGroupRequest;
import dev.strata.csi.agent.api.DeleteSnapshotRequest;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.VolumeGroup;
import dev.strata.csi.agent.api.VolumeGroupCutRequest;
import dev.strata.csi.agent.api.VolumeGroupCutResponse;
import dev.strata.csi.agent.api.VolumeGroupFreeze;
import dev.strata.csi.agent.api.VolumeGroupMember;
import dev.strata.csi.agent.api.VolumeGroupTake;
import dev.strata.csi.agent.api.VolumeGroupTaken;
import dev.strata.csi.backend.local.GroupSnapshotId;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.controller.agents.VolumeIndex;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Group snapshots of local volumes (the CSI GroupController): one cut across all the volumes of a
 * group, on one node or several. Every node of the group freezes the filesystems of its members
 * first; once all are frozen, each takes its members and thaws (VolumeGroupCuts on the node, which
 * keeps the freeze's deadline and thaws by itself whatever dies); then each node commits its
 * members. The controller keeps no records: each member's record holds the whole group, so a
 * group is found, checked and completed from any member ({@link VolumeIndex}). A cut broken off
 * leaves uncommitted members at most, which the retry removes before it cuts again, and the
 * agent's next start removes too.
 */
public final class GroupSnapshots {

    /** How long a node keeps its filesystems frozen at most: the agent thaws by itself then. */
    static final Duration FREEZE_DEADLINE = Duration.ofSeconds(30);

    private final AgentDirectory agents;
    private final Duration callTimeout;
    private final GroupSnapshotMetrics metrics;
    private final Clock clock;
    private final Log log;

    public GroupSnapshots(AgentDirectory agents, Duration callTimeout, GroupSnapshotMetrics metrics, Clock clock, Log log) {
        this.agents = agents;
        this.callTimeout = callTimeout;
        this.metrics = metrics;
        this.clock = clock;
        this.log = log;
    }

    /** A group as a member's record keeps it, and which of its members the nodes reported. */
    private record Found(VolumeGroup group, List<VolumeIndex.Located<Snapshot>> present) {
        boolean complete() {
            return present.size() == group.getMembersCount();
        }

        boolean committed() {
            return complete() && present.stream().allMatch(member -> member.item().getGroup().getCommitted());
        }

        List<LocalVolumeId> volumes() {
            return group.getMembersList().stream().map(member -> new LocalVolumeId(member.getNodeId(), member.getVolume())).toList();
        }
    }

    /**
     * Takes the group snapshot {@code id} of {@code volumes}, or returns it when it exists of the
     * same volumes (other volumes: ALREADY_EXISTS). A group a broken cut left incomplete is
     * completed when every member was taken, else removed and cut again.
     */
    public VolumeGroupSnapshot create(GroupSnapshotId id, List<LocalVolumeId> volumes) throws Exception {
        List<LocalVolumeId> sorted = sorted(volumes);
        for (LocalVolumeId volume : sorted) {
            agents.requireKnown(volume.nodeId(), "source volume " + volume + " does not exist: node " + volume.nodeId() + " has no agent");
        }
        List<String> hints = new ArrayList<>();
        for (int i = 0; i < sorted.size(); i++) {
            hints.add(id.member(i));
        }
        Optional<Found> existing = find(id, hints);
        if (existing.isPresent()) {
            Found found = existing.get();
            boolean same = found.volumes().equals(sorted);
            if (found.committed()) {
                if (!same) {
                    throw CsiException.alreadyExists("group snapshot " + id.name() + " exists of volumes " + found.volumes()
                            + "; asked for one of " + sorted);
                }
                return group(id, found);
            }
            if (same && found.complete()) {
                return group(id, commit(id, found.group()));
            }
            undo(found.group());
        } else {
            agents.requireReported("whether group snapshot " + id.name() + " exists");
        }
        return cut(id, sorted);
    }

    /** The complete group {@code id}; NOT_FOUND when it is not, or when {@code snapshotIds} name other snapshots than its members. */
    public VolumeGroupSnapshot get(GroupSnapshotId id, List<String> snapshotIds) {
        Found found = find(id, names(snapshotIds)).orElseThrow(() -> CsiException.notFound("group snapshot " + id + " does not exist"));
        requireMembers(found, snapshotIds);
        if (!found.committed()) {
            throw CsiException.notFound("group snapshot " + id + " is not complete: " + found.present().size() + " of its "
                    + found.group().getMembersCount() + " members are there" + (found.complete() ? ", not all committed" : ""));
        }
        return group(id, found);
    }

    /** Deletes every member of group {@code id}; succeeds when gone. INVALID_ARGUMENT when {@code snapshotIds} are not its members. */
    public void delete(GroupSnapshotId id, List<String> snapshotIds) {
        Optional<Found> found = find(id, names(snapshotIds));
        if (found.isEmpty()) {
            return;
        }
        requireMembers(found.get(), snapshotIds);
        undo(found.get().group());
        log.info("group snapshot deleted", "group", id.name(), "members", found.get().group().getMembersCount());
    }

    private static List<LocalVolumeId> sorted(List<LocalVolumeId> volumes) {
        TreeSet<String> ids = new TreeSet<>();
        for (LocalVolumeId volume : volumes) {
            if (!ids.add(volume.toString())) {
                throw CsiException.invalidArgument("source_volume_ids names volume " + volume + " twice");
            }
        }
        return ids.stream().map(id -> LocalVolumeId.parse(id).orElseThrow()).toList();
    }

    /** The snapshot names in ids of this driver, where a group's member may be found. */
    private static List<String> names(List<String> snapshotIds) {
        return snapshotIds.stream().map(LocalSnapshotId::parse).flatMap(Optional::stream).map(LocalSnapshotId::name).toList();
    }

    /** INVALID_ARGUMENT when {@code snapshotIds}, given, are not exactly the group's members. */
    private static void requireMembers(Found found, List<String> snapshotIds) {
        if (snapshotIds.isEmpty()) {
            return;
        }
        TreeSet<String> members = new TreeSet<>();
        for (VolumeGroupMember member : found.group().getMembersList()) {
            members.add(new LocalSnapshotId(member.getNodeId(), member.getSnapshot()).toString());
        }
        if (!members.equals(new TreeSet<>(snapshotIds))) {
            throw CsiException.invalidArgument("snapshot_ids " + new TreeSet<>(snapshotIds) + " are not the members of group snapshot "
                    + found.group().getName() + ": " + members);
        }
    }

    /** The group, from the first member the nodes reported among {@code names} and its first member's name. */
    private Optional<Found> find(GroupSnapshotId id, List<String> names) {
        List<String> candidates = new ArrayList<>(names);
        candidates.add(id.member(0));
        for (String name : candidates) {
            for (VolumeIndex.Located<Snapshot> located : agents.index().snapshots(name)) {
                if (located.item().getGroup().getName().equals(id.name())) {
                    return Optional.of(present(located.item().getGroup()));
                }
            }
        }
        return Optional.empty();
    }

    /** The members the nodes reported; UNAVAILABLE while a member's node has not reported since its start. */
    private Found present(VolumeGroup group) {
        List<VolumeIndex.Located<Snapshot>> present = new ArrayList<>();
        for (VolumeGroupMember member : group.getMembersList()) {
            var found = agents.index().snapshots(member.getSnapshot()).stream()
                    .filter(located -> located.nodeId().equals(member.getNodeId())
                            && located.item().getGroup().getName().equals(group.getName()))
                    .findFirst();
            if (found.isEmpty()) {
                agents.requireReported(member.getNodeId(), "whether member " + member.getSnapshot() + " of group snapshot "
                        + group.getName() + " exists");
            }
            found.ifPresent(present::add);
        }
        return new Found(group, present);
    }

    /** Freeze on every node, then take on every node, then commit on every node. */
    private VolumeGroupSnapshot cut(GroupSnapshotId id, List<LocalVolumeId> volumes) throws Exception {
        Instant now = clock.instant();
        VolumeGroup.Builder builder = VolumeGroup.newBuilder().setName(id.name())
                .setCreationTime(Timestamp.newBuilder().setSeconds(now.getEpochSecond()).setNanos(now.getNano()));
        Map<String, List<String>> byNode = new LinkedHashMap<>();
        for (int i = 0; i < volumes.size(); i++) {
            LocalVolumeId volume = volumes.get(i);
            builder.addMembersBuilder().setNodeId(volume.nodeId()).setVolume(volume.name()).setSnapshot(id.member(i));
            byNode.computeIfAbsent(volume.nodeId(), node -> new ArrayList<>()).add(volume.name());
        }
        VolumeGroup group = builder.build();
        long start = System.nanoTime();
        List<NodeCut> cuts = new ArrayList<>();
        try {
            for (String node : byNode.keySet()) {
                cuts.add(new NodeCut(node, group));
            }
            int frozen = 0;
            for (NodeCut cut : cuts) {
                frozen += cut.awaitFrozen();
            }
            long allFrozen = System.nanoTime();
            long longest = 0;
            for (NodeCut cut : cuts) {
                cut.take();
            }
            for (NodeCut cut : cuts) {
                VolumeGroupTaken taken = cut.awaitTaken();
                for (Snapshot member : taken.getSnapshotsList()) {
                    agents.index().snapshot(cut.node, member.getName(), member, taken.getGeneration());
                }
                longest = Math.max(longest, taken.getFrozenMicros());
            }
            Found committed = commit(id, group);
            Duration window = Duration.ofNanos(longest * 1000);
            metrics.taken(Duration.ofNanos(System.nanoTime() - start), window);
            log.info("group snapshot taken", "group", id.name(), "volumes", volumes.size(), "nodes", byNode.size(), "frozen", frozen,
                    "freeze_window_ms", String.format("%.3f", longest / 1000.0),
                    "freeze_all_ms", String.format("%.3f", (allFrozen - start) / 1e6),
                    "duration_ms", (System.nanoTime() - start) / 1_000_000);
            return group(id, committed);
        } catch (Exception e) {
            cuts.forEach(NodeCut::cancel); // the agents thaw at once
            metrics.failed();
            log.warn("group snapshot failed; its members taken so far are removed", "group", id.name(), "error", CsiException.describe(e));
            try {
                undo(group);
            } catch (RuntimeException undo) {
                log.warn("cannot remove the members of a failed group snapshot yet; the retry or the agents' next start will",
                        "group", id.name(), "error", CsiException.describe(undo));
            }
            throw e;
        }
    }

    /** Commits the group on each of its nodes. */
    private Found commit(GroupSnapshotId id, VolumeGroup group) {
        for (String node : group.getMembersList().stream().map(VolumeGroupMember::getNodeId).distinct().toList()) {
            var committed = agents.stub(node).commitVolumeGroup(CommitVolumeGroupRequest.newBuilder().setName(id.name()).build());
            for (Snapshot member : committed.getSnapshotsList()) {
                agents.index().snapshot(node, member.getName(), member, committed.getGeneration());
            }
        }
        Found found = present(group);
        if (!found.committed()) {
            throw CsiException.aborted("group snapshot " + id.name() + ": " + found.present().size() + " of "
                    + group.getMembersCount() + " members committed; retry");
        }
        return found;
    }

    /**
     * Deletes every member of the group on its node, reported or not (a delete of a member that is
     * not there succeeds); a node that never registered holds none.
     */
    private void undo(VolumeGroup group) {
        for (VolumeGroupMember member : group.getMembersList()) {
            try {
                agents.requireKnown(member.getNodeId(), "node " + member.getNodeId() + " has no agent");
            } catch (CsiException e) {
                if (e.code() == Status.Code.NOT_FOUND) {
                    continue; // as DeleteSnapshot: a node that never registered holds no snapshot
                }
                throw e;
            }
            var deleted = agents.stub(member.getNodeId()).deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName(member.getSnapshot()).build());
            agents.index().snapshot(member.getNodeId(), member.getSnapshot(), null, deleted.getGeneration());
        }
    }

    private static VolumeGroupSnapshot group(GroupSnapshotId id, Found found) {
        VolumeGroupSnapshot.Builder group = VolumeGroupSnapshot.newBuilder()
                .setGroupSnapshotId(id.toString())
                .setCreationTime(found.group().getCreationTime())
                .setReadyToUse(true);
        for (VolumeIndex.Located<Snapshot> member : found.present()) {
            group.addSnapshots(LocalController.snapshot(member.nodeId(), member.item()));
        }
        return group.build();
    }

    /** One node's stream of the cut: its answers queued for the controller's thread. */
    private final class NodeCut implements ClientResponseObserver<VolumeGroupCutRequest, VolumeGroupCutResponse> {

        private final String node;
        private final LinkedBlockingQueue<Object> answers = new LinkedBlockingQueue<>();
        private volatile ClientCallStreamObserver<VolumeGroupCutRequest> call;

        NodeCut(String node, VolumeGroup group) {
            this.node = node;
            agents.streamStub(node).cutVolumeGroup(this);
            call.onNext(VolumeGroupCutRequest.newBuilder().setFreeze(VolumeGroupFreeze.newBuilder()
                    .setGroup(group).setNodeId(node).setDeadlineMillis(FREEZE_DEADLINE.toMillis())).build());
        }

        @Override
        public void beforeStart(ClientCallStreamObserver<VolumeGroupCutRequest> call) {
            this.call = call;
        }

        @Override
        public void onNext(VolumeGroupCutResponse response) {
            answers.add(response);
        }

        @Override
        public void onError(Throwable t) {
            answers.add(t);
        }

        @Override
        public void onCompleted() {
            answers.add(Status.UNAVAILABLE.withDescription("node " + node + " ended the group cut early"));
        }

        int awaitFrozen() throws InterruptedException {
            // A freeze flushes what the volumes' writers wrote: on a busy node longer than a call, within the deadline.
            return next(FREEZE_DEADLINE, "freeze").getFrozen().getFrozenFilesystems();
        }

        void take() {
            call.onNext(VolumeGroupCutRequest.newBuilder().setTake(VolumeGroupTake.getDefaultInstance()).build());
        }

        VolumeGroupTaken awaitTaken() throws InterruptedException {
            VolumeGroupTaken taken = next(FREEZE_DEADLINE.plus(callTimeout), "take").getTaken();
            call.onCompleted();
            return taken;
        }

        private VolumeGroupCutResponse next(Duration timeout, String step) throws InterruptedException {
            Object answer = answers.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
            return switch (answer) {
                case null -> throw CsiException.unavailable("node " + node + " did not " + step + " within " + timeout.toMillis() + " ms");
                case VolumeGroupCutResponse response -> response;
                case Status status -> throw status.asRuntimeException();
                case Throwable t -> {
                    Status status = Status.fromThrowable(t);
                    throw new StatusRuntimeException(status.withDescription("node " + node + ": " + status.getDescription()));
                }
                default -> throw new IllegalStateException(answer.toString());
            };
        }

        void cancel() {
            if (call != null) {
                call.cancel("the group cut ended", null);
            }
        }
    }
}
