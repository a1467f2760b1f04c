package dev.strata.csi.node.agent;

import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.InventoryChanges;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.pool.NodePools;
import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * What this agent tells the controllers of its pool, so that they know where every volume and
 * snapshot is without asking every node: a generation that grows by one at every change of an
 * volume or a listable snapshot, and which names changed at which generation. A report for a
 * controller holds everything, or, when it has a generation still remembered, the names changed
 * since then as they are now. Changes are counted after they are made (under the name's lock), so
 * a report read after taking the generation holds every change up to it.
 */
public final class Inventory {

    /** Past this many remembered names the memory is cleared: a controller further behind gets everything. */
    private static final int REMEMBERED = 100_000;

    private final NodePools pools;
    private final SnapshotTombstones tombstones;
    private final Map<String, Long> volumes = new HashMap<>();
    private final Map<String, Long> snapshots = new HashMap<>();
    private final Map<String, Long> tombstoneNames = new HashMap<>();
    private final List<Runnable> listeners = new CopyOnWriteArrayList<>();
    private long generation;
    /** Changes up to this generation are forgotten. */
    private long floor;

    public Inventory(NodePools pools, SnapshotTombstones tombstones) {
        this.pools = pools;
        this.tombstones = tombstones;
    }

    /** Called at every change, after it is counted: the renewals push it to the controllers. */
    void onChange(Runnable listener) {
        listeners.add(listener);
    }

    /** Counts a change of volume {@code name}; the generation that includes it. */
    long volumeChanged(String name) {
        return changed(volumes, name);
    }

    long snapshotChanged(String name) {
        return changed(snapshots, name);
    }

    /** Counts a change of the snapshot {@code name} and of its tombstone (DeleteSnapshot changes both). */
    long snapshotAndTombstoneChanged(String name) {
        changed(tombstoneNames, name);
        return changed(snapshots, name);
    }

    private long changed(Map<String, Long> names, String name) {
        long now;
        synchronized (this) {
            now = ++generation;
            names.put(name, now);
            if (volumes.size() + snapshots.size() + tombstoneNames.size() > REMEMBERED) {
                volumes.clear();
                snapshots.clear();
                tombstoneNames.clear();
                floor = now;
            }
        }
        listeners.forEach(Runnable::run);
        return now;
    }

    synchronized long generation() {
        return generation;
    }

    /**
     * Puts the report for a controller that confirmed {@code confirmed} (-1: none yet, or it asked
     * for everything) into {@code request}; returns the generation it reports.
     */
    long report(long confirmed, RegisterRequest.Builder request) throws IOException, DeviceException {
        long now;
        List<String> changedVolumes;
        List<String> changedSnapshots;
        List<String> changedTombstones;
        boolean everything;
        synchronized (this) {
            now = generation;
            everything = confirmed < 0 || confirmed < floor;
            changedVolumes = everything ? List.of() : since(volumes, confirmed);
            changedSnapshots = everything ? List.of() : since(snapshots, confirmed);
            changedTombstones = everything ? List.of() : since(tombstoneNames, confirmed);
        }
        request.setGeneration(now);
        if (everything) {
            request.setInventory(dev.strata.csi.agent.api.Inventory.newBuilder()
                    .addAllVolumes(pools.list())
                    .addAllSnapshots(pools.snapshots())
                    .addAllTombstones(tombstones.all()));
        } else if (confirmed < now) {
            InventoryChanges.Builder changes = InventoryChanges.newBuilder().setBaseGeneration(confirmed);
            for (String name : changedVolumes) {
                Optional<Volume> volume = pools.get(name);
                volume.ifPresentOrElse(changes::addVolumes, () -> changes.addRemovedVolumes(name));
            }
            for (String name : changedSnapshots) {
                Optional<Snapshot> snapshot = pools.listedSnapshot(name);
                snapshot.ifPresentOrElse(changes::addSnapshots, () -> changes.addRemovedSnapshots(name));
            }
            for (String name : changedTombstones) {
                tombstones.get(name).ifPresentOrElse(changes::addTombstones, () -> changes.addRemovedTombstones(name));
            }
            request.setChanges(changes);
        }
        return now;
    }

    private static List<String> since(Map<String, Long> names, long confirmed) {
        return names.entrySet().stream().filter(entry -> entry.getValue() > confirmed).map(Map.Entry::getKey).toList();
    }
}
