package dev.strata.csi.controller.agents;

import dev.strata.csi.agent.api.InventoryChanges;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;

/**
 * What a node agent's registration says, checked before the controller believes it: a node's
 * report is one node's word, and root on that node can make it say anything. Pool figures must be
 * sane (none negative or above {@link #MAX_BYTES}, what is available or used not above the total),
 * or the registration is refused (INVALID_ARGUMENT) and the node keeps its last sane figures, so
 * a node cannot draw every unconstrained volume to itself with a made-up free space. Each volume
 * and snapshot must have a name the agents accept (the same rules) and sane sizes, else that entry
 * is dropped and logged, and the rest of the report applies: one malformed entry never reaches
 * ListVolumes or ListSnapshots, which would fail for the whole cluster. Which node a name belongs
 * to is not decided here: {@link VolumeIndex} keeps this controller's own creations over reports.
 */
final class ReportCheck {

    /** No pool or volume is larger: 1 EiB. */
    static final long MAX_BYTES = 1L << 60;

    private final Log log;

    ReportCheck(Log log) {
        this.log = log;
    }

    /** The report with its malformed entries dropped (each logged); INVALID_ARGUMENT for insane pool figures. */
    RegisterRequest checked(RegisterRequest request) {
        String node = request.getNodeId();
        List<PoolStatus> pools = new ArrayList<>(request.getPoolsList());
        if (request.hasPool()) {
            pools.add(request.getPool());
        }
        for (PoolStatus pool : pools) {
            poolProblem(pool).ifPresent(problem -> {
                log.warn("node agent's registration refused: its pool figures are not sane", "node", node, "problem", problem);
                throw CsiException.invalidArgument("pool " + pool.getKind() + " of node " + node + ": " + problem);
            });
        }
        List<String> dropped = new ArrayList<>();
        RegisterRequest.Builder checked = request.toBuilder();
        if (request.hasInventory()) {
            checked.getInventoryBuilder()
                    .clearVolumes().addAllVolumes(kept(request.getInventory().getVolumesList(), ReportCheck::volumeProblem, dropped))
                    .clearSnapshots().addAllSnapshots(kept(request.getInventory().getSnapshotsList(), ReportCheck::snapshotProblem, dropped));
        }
        if (request.hasChanges()) {
            InventoryChanges changes = request.getChanges();
            checked.getChangesBuilder()
                    .clearVolumes().addAllVolumes(kept(changes.getVolumesList(), ReportCheck::volumeProblem, dropped))
                    .clearSnapshots().addAllSnapshots(kept(changes.getSnapshotsList(), ReportCheck::snapshotProblem, dropped))
                    .clearRemovedVolumes().addAllRemovedVolumes(kept(changes.getRemovedVolumesList(),
                            name -> nameProblem(name, LocalVolumeId::checkName), dropped))
                    .clearRemovedSnapshots().addAllRemovedSnapshots(kept(changes.getRemovedSnapshotsList(),
                            name -> nameProblem(name, LocalSnapshotId::checkName), dropped));
        }
        if (!dropped.isEmpty()) {
            log.warn("node agent reported malformed volumes or snapshots; dropped, the rest of its report applies", "node", node,
                    "count", dropped.size(), "first", dropped.getFirst());
        }
        return checked.build();
    }

    private static <T> List<T> kept(List<T> entries, Function<T, Optional<String>> problem, List<String> dropped) {
        List<T> kept = new ArrayList<>(entries.size());
        for (T entry : entries) {
            problem.apply(entry).ifPresentOrElse(dropped::add, () -> kept.add(entry));
        }
        return kept;
    }

    static Optional<String> poolProblem(PoolStatus pool) {
        if (!sane(pool.getTotalBytes()) || !sane(pool.getAvailableBytes()) || !sane(pool.getLinearAvailableBytes())
                || !sane(pool.getThinReservedBytes()) || !sane(pool.getThinDataBytes()) || !sane(pool.getThinDataUsedBytes())
                || !sane(pool.getThinMetadataBytes()) || !sane(pool.getThinMetadataUsedBytes()) || pool.getVolumeCount() < 0) {
            return Optional.of("a size is negative or above " + MAX_BYTES + " bytes");
        }
        if (pool.getAvailableBytes() > pool.getTotalBytes()) {
            return Optional.of(pool.getAvailableBytes() + " bytes available of " + pool.getTotalBytes() + " in all");
        }
        if (pool.getThinDataUsedBytes() > pool.getThinDataBytes() || pool.getThinMetadataUsedBytes() > pool.getThinMetadataBytes()) {
            return Optional.of("the thin pool uses more than its size");
        }
        return Optional.empty();
    }

    static Optional<String> volumeProblem(Volume volume) {
        Optional<String> name = nameProblem(volume.getName(), LocalVolumeId::checkName);
        if (name.isPresent()) {
            return name;
        }
        if (!sane(volume.getCapacityBytes())) {
            return Optional.of("volume " + volume.getName() + ": capacity " + volume.getCapacityBytes() + " bytes");
        }
        for (String nodeId : volume.getPublishedNodeIdsList()) {
            if (!LocalVolumeId.nodeIdAllowed(nodeId)) {
                return Optional.of("volume " + volume.getName() + ": published to '" + CsiException.printable(nodeId) + "'");
            }
        }
        if (volume.hasSource()) {
            return volume.getSource().hasSnapshot() ? nameProblem(volume.getSource().getSnapshot(), LocalSnapshotId::checkName)
                    : nameProblem(volume.getSource().getVolume(), LocalVolumeId::checkName);
        }
        return Optional.empty();
    }

    static Optional<String> snapshotProblem(Snapshot snapshot) {
        Optional<String> name = nameProblem(snapshot.getName(), LocalSnapshotId::checkName)
                .or(() -> nameProblem(snapshot.getSourceVolume(), LocalVolumeId::checkName));
        if (name.isPresent()) {
            return name;
        }
        if (!sane(snapshot.getCapacityBytes())) {
            return Optional.of("snapshot " + snapshot.getName() + ": capacity " + snapshot.getCapacityBytes() + " bytes");
        }
        return Optional.empty();
    }

    /** The agents' own rule for a name, as a problem instead of an error. */
    private static Optional<String> nameProblem(String name, java.util.function.Consumer<String> rule) {
        try {
            rule.accept(name);
            return Optional.empty();
        } catch (CsiException e) {
            return Optional.of(e.getMessage());
        }
    }

    private static boolean sane(long bytes) {
        return bytes >= 0 && bytes <= MAX_BYTES;
    }
}
