package dev.strata.csi.node.agent;

import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.VolumeGroup;
import dev.strata.csi.agent.api.VolumeGroupCutRequest;
import dev.strata.csi.agent.api.VolumeGroupCutResponse;
import dev.strata.csi.agent.api.VolumeGroupFreeze;
import dev.strata.csi.agent.api.VolumeGroupFrozen;
import dev.strata.csi.agent.api.VolumeGroupMember;
import dev.strata.csi.agent.api.VolumeGroupTaken;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.backend.local.records.GroupMember;
import dev.strata.csi.backend.local.records.SnapshotGroup;
import dev.strata.csi.log.Log;
import dev.strata.csi.metrics.Buckets;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.pool.Concurrently;
import dev.strata.csi.node.local.pool.FrozenVolumes;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.PoolSnapshots;
import dev.strata.csi.node.local.pool.VolumeSnapshots;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;

/**
 * This node's part of a group snapshot's cut (CutVolumeGroup): freeze the filesystems of the
 * group's volumes here, take their member snapshots once the controller says every node is
 * frozen, thaw. The deadline is kept here, not by the controller: the filesystems are thawed when
 * it passes, when the stream ends or breaks before the take (the controller or its connection
 * gone), and at the next start from the freeze records should this process die. The volumes'
 * and members' locks are held from the freeze to the end, so no stage, unstage or snapshot of them
 * runs meanwhile.
 */
final class VolumeGroupCuts {

    /** The longest freeze a controller may ask for: the writers of the volumes wait that long at most. */
    static final Duration LONGEST_FREEZE = Duration.ofMinutes(1);

    private final NodePools pools;
    private final VolumeLocks locks;
    private final Inventory inventory;
    private final Crashes<CrashPoint> crashes;
    private final Log log;
    private final Histogram windows;
    private final ScheduledExecutorService deadlines = Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon()
            .name("group-freeze-deadline").factory());

    VolumeGroupCuts(NodePools pools, VolumeLocks locks, Inventory inventory, PrometheusRegistry metrics, Crashes<CrashPoint> crashes,
            Log log) {
        this.pools = pools;
        this.locks = locks;
        this.inventory = inventory;
        this.crashes = crashes;
        this.log = log;
        this.windows = Histogram.builder()
                .name("strata_group_snapshot_freeze_seconds")
                .help("The longest time one of a group snapshot's filesystems on this node was frozen, from its FIFREEZE to its FITHAW, "
                        + "by outcome (taken; abandoned: the stream ended first; lapsed: the deadline passed)")
                .labelNames("outcome")
                .classicOnly()
                .classicUpperBounds(Buckets.OPERATIONS)
                .register(metrics);
    }

    StreamObserver<VolumeGroupCutRequest> cut(ServerCallStreamObserver<VolumeGroupCutResponse> response) {
        Cut cut = new Cut(response);
        response.setOnCancelHandler(() -> cut.abandon("the controller's stream was cancelled"));
        return cut;
    }

    /** CommitVolumeGroup: the group's members here committed, each counted in the inventory. */
    List<Snapshot> commit(String group) throws Exception {
        checkGroupName(group);
        List<Snapshot> members = pools.commitGroup(group);
        for (Snapshot member : members) {
            inventory.snapshotChanged(member.getName());
        }
        crashes.reach(CrashPoint.GROUP_COMMITTED);
        log.info("group snapshot committed", "group", group, "members", members.size());
        return members;
    }

    private static void checkGroupName(String group) {
        if (group.isEmpty()) {
            throw CsiException.missing("name");
        }
        LocalSnapshotId.checkName(group);
    }

    /** One stream: a freeze, then a take; anything else ends it. */
    private final class Cut implements StreamObserver<VolumeGroupCutRequest> {

        private final ServerCallStreamObserver<VolumeGroupCutResponse> out;
        private final List<VolumeLocks.Held> held = new ArrayList<>();
        private VolumeGroupFreeze freeze;
        private List<VolumeGroupMember> members = List.of();
        /** This node's members, recorded (CREATING) before the freeze: the window holds no record write. */
        private final List<VolumeSnapshots.Pending> pending = new ArrayList<>();
        private boolean finished;
        private FrozenVolumes frozen;
        private ScheduledFuture<?> deadline;
        private boolean ended;

        Cut(ServerCallStreamObserver<VolumeGroupCutResponse> out) {
            this.out = out;
        }

        @Override
        public synchronized void onNext(VolumeGroupCutRequest request) {
            if (ended) {
                return;
            }
            try {
                switch (request.getStepCase()) {
                    case FREEZE -> out.onNext(VolumeGroupCutResponse.newBuilder().setFrozen(freeze(request.getFreeze())).build());
                    case TAKE -> {
                        VolumeGroupTaken taken = take();
                        end();
                        out.onNext(VolumeGroupCutResponse.newBuilder().setTaken(taken).build());
                        out.onCompleted();
                    }
                    case STEP_NOT_SET -> throw CsiException.invalidArgument("a group cut's message names no step");
                }
            } catch (Exception e) {
                fail(Rpc.status(e));
            }
        }

        @Override
        public void onError(Throwable t) {
            abandon("the controller's stream broke: " + Status.fromThrowable(t).getCode());
        }

        @Override
        public synchronized void onCompleted() {
            if (!ended) {
                abandon("the controller ended the stream before the take");
                out.onCompleted();
            }
        }

        private VolumeGroupFrozen freeze(VolumeGroupFreeze request) throws Exception {
            if (freeze != null) {
                throw CsiException.invalidArgument("a group cut freezes once");
            }
            VolumeGroup group = request.getGroup();
            checkGroupName(group.getName());
            if (request.getDeadlineMillis() <= 0 || request.getDeadlineMillis() > LONGEST_FREEZE.toMillis()) {
                throw CsiException.invalidArgument("deadline_millis must be positive and at most " + LONGEST_FREEZE.toMillis());
            }
            members = group.getMembersList().stream().filter(member -> member.getNodeId().equals(request.getNodeId())).toList();
            if (members.isEmpty()) {
                throw CsiException.invalidArgument("group snapshot " + group.getName() + " has no member on node " + request.getNodeId());
            }
            freeze = request;
            VolumeSnapshots.Membership membership = new VolumeSnapshots.Membership(record(group), group.getCreationTime());
            List<String> volumes = new ArrayList<>();
            for (VolumeGroupMember member : members) {
                LocalVolumeId.checkName(member.getVolume());
                LocalSnapshotId.checkName(member.getSnapshot());
                held.add(locks.acquire(member.getVolume()));
                held.add(locks.acquire(PoolSnapshots.lockKey(member.getSnapshot())));
                volumes.add(member.getVolume());
            }
            for (VolumeGroupMember member : members) {
                try {
                    pending.add(pools.forNewSnapshot(member.getSnapshot(), member.getVolume()).snapshots()
                            .prepare(member.getSnapshot(), member.getVolume(), false, List.of(), Optional.of(membership)));
                } finally {
                    inventory.snapshotChanged(member.getSnapshot());
                }
            }
            FrozenVolumes now = pools.freeze(volumes);
            frozen = now;
            // Not through this stream's monitor, which a take holds: the deadline thaws even mid-take.
            deadline = deadlines.schedule(() -> thaw(now, "lapsed", "its deadline of " + request.getDeadlineMillis() + " ms passed"),
                    request.getDeadlineMillis(), TimeUnit.MILLISECONDS);
            log.info("group snapshot: filesystems frozen", "group", group.getName(), "volumes", volumes.size(), "frozen", frozen.count());
            crashes.reach(CrashPoint.GROUP_FROZEN);
            return VolumeGroupFrozen.newBuilder().setFrozenFilesystems(frozen.count()).build();
        }

        /**
         * Every member of this node, each thawed as soon as it is taken: every member of the group
         * is frozen now (the controller takes once every node is), so that moment is the cut, and a
         * member's writers need not wait for the others' copies. Then the freezes are forgotten and
         * the copies made durable, the window closed. Should the deadline have thawed meanwhile, a
         * copy may have seen writes after the cut: the members are deleted, ABORTED.
         */
        private VolumeGroupTaken take() throws Exception {
            if (frozen == null) {
                throw CsiException.failedPrecondition("a group cut takes its snapshots once frozen");
            }
            if (frozen.released()) {
                throw CsiException.aborted("group snapshot " + freeze.getGroup().getName() + ": the freeze passed its deadline before the take");
            }
            long took = System.nanoTime();
            long[] copied = new long[pending.size()];
            Concurrently.run(IntStream.range(0, pending.size()).boxed().toList(), i -> {
                try {
                    pending.get(i).copy();
                } catch (DeviceException e) {
                    if (e.getMessage().contains("suspend") && e.getMessage().contains("busy")) {
                        // lvcreate suspends a thin snapshot's origin, which freezes its filesystem again: a
                        // kernel where a block device's freeze does not nest in FIFREEZE (before 6.8) refuses.
                        // Suspending it first without that freeze is no way out: lvcreate then skips its own
                        // suspend, and with it the thin pool's message that makes the snapshot (docs/design.md).
                        throw CsiException.failedPrecondition("group snapshot " + freeze.getGroup().getName() + ": this node's kernel "
                                + "refuses to suspend a logical volume whose filesystem the group holds frozen (Linux before 6.8), "
                                + "so a filesystem made directly on an LVM volume cannot be in a group snapshot here (an encrypted, "
                                + "block or unstaged LVM volume can): " + e.getMessage());
                    }
                    throw e;
                }
                copied[i] = System.nanoTime();
                crashes.reach(CrashPoint.GROUP_MEMBER_TAKEN);
                frozen.thawTaken(members.get(i).getVolume());
            });
            boolean lapsed = frozen.released();
            Duration window = frozen.release();
            if (lapsed) {
                discard();
                throw CsiException.aborted("group snapshot " + freeze.getGroup().getName() + ": the freeze passed its deadline during the take");
            }
            VolumeGroupTaken.Builder taken = VolumeGroupTaken.newBuilder();
            for (VolumeSnapshots.Pending member : pending) {
                taken.addSnapshots(member.finish());
            }
            finished = true;
            for (VolumeGroupMember member : members) {
                inventory.snapshotChanged(member.getSnapshot());
            }
            windows.labelValues("taken").observe(window.toNanos() / 1e9);
            if (log.debugEnabled() && frozen.count() > 0) {
                long origin = frozen.freezing();
                StringBuilder copies = new StringBuilder();
                for (int i = 0; i < copied.length; i++) {
                    copies.append(String.format("%s:%.1f ", members.get(i).getVolume(), (copied[i] - origin) / 1e6));
                }
                log.debug("group snapshot: the cut's timeline, ms from the first FIFREEZE", "group", freeze.getGroup().getName(),
                        "freezes", frozen.timeline(origin), "take", String.format("%.1f", (took - origin) / 1e6), "copied", copies.toString().strip());
            }
            log.info("group snapshot: members taken, filesystems thawed", "group", freeze.getGroup().getName(), "members", members.size(),
                    "frozen", frozen.count(), "freeze_window_ms", String.format("%.3f", window.toNanos() / 1e6));
            crashes.reach(CrashPoint.GROUP_THAWED);
            return taken.setGeneration(inventory.generation()).setFrozenMicros(window.toNanos() / 1000).build();
        }

        /** Thaws, and answers the failure. */
        private void fail(Status status) {
            abandon(status.getDescription());
            try {
                out.onError(status.asRuntimeException());
            } catch (RuntimeException e) {
                // the call ended meanwhile
            }
        }

        /** Thaws what is frozen, whatever the reason, and releases the locks: the stream is over for this node. */
        synchronized void abandon(String why) {
            if (ended) {
                return;
            }
            if (frozen != null) {
                thaw(frozen, "abandoned", why);
            }
            if (!finished) {
                try {
                    discard();
                } catch (Exception e) {
                    log.warn("group snapshot: cannot remove the members recorded for a cut that did not happen; the retry or the next start will",
                            "group", freeze.getGroup().getName(), "error", CsiException.describe(e));
                }
            }
            end();
        }

        /** Removes the members this cut recorded: they hold no content of the cut. */
        private void discard() throws Exception {
            for (int i = 0; i < pending.size(); i++) {
                if (pending.get(i).fresh()) {
                    String name = members.get(i).getSnapshot();
                    pools.holdingSnapshot(name).snapshots().delete(name);
                    inventory.snapshotChanged(name);
                }
            }
            pending.clear();
        }

        /** Thaws {@code frozen} unless thawed already, for a cut that will not take its members as they were. */
        private void thaw(FrozenVolumes frozen, String outcome, String why) {
            if (frozen.released()) {
                return;
            }
            try {
                Duration window = frozen.release();
                windows.labelValues(outcome).observe(window.toNanos() / 1e9);
                log.warn("group snapshot: filesystems thawed without a take", "group", freeze.getGroup().getName(), "why", why,
                        "freeze_window_ms", window.toMillis());
            } catch (Exception e) {
                log.error("group snapshot: cannot thaw; the freeze records stay for the next start", "group",
                        freeze.getGroup().getName(), "error", CsiException.describe(e));
            }
        }

        private void end() {
            ended = true;
            if (deadline != null) {
                deadline.cancel(false);
            }
            held.forEach(VolumeLocks.Held::close);
            held.clear();
        }
    }

    /** The group as each member's record keeps it, uncommitted. */
    private static SnapshotGroup record(VolumeGroup group) {
        SnapshotGroup.Builder record = SnapshotGroup.newBuilder().setName(group.getName());
        for (VolumeGroupMember member : group.getMembersList()) {
            record.addMembers(GroupMember.newBuilder().setNodeId(member.getNodeId()).setVolume(member.getVolume())
                    .setSnapshot(member.getSnapshot()));
        }
        return record.build();
    }
}
