package dev.strata.csi.controller.agents;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.InventoryChanges;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.SnapshotTombstone;
import dev.strata.csi.agent.api.Volume;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentNavigableMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * Where every volume and snapshot is, as the node agents report it ({@code Inventory} in
 * node-server): each node's volumes and listable snapshots, complete once its agent process sent
 * everything, current as of the generation of its last report. The controller's own calls enter
 * their results too, with the generation the agent gave in its reply: an entry newer than a report
 * (a create answered while an older report was on its way) is kept over it, so a report never
 * takes back what this replica has seen done. An entry a call of this controller made stays
 * marked as such ({@link Located#made}): where a name is on several nodes, the one this controller
 * made wins over what a node merely reports (a compromised node reporting another's name).
 *
 * <p>Lean, since a cluster holds hundreds of thousands of volumes (docs/scale.md, "Memory"): one
 * ordered map of every entry by {@code <node>/<name>} and one map of names to the node holding
 * each; a volume keeps only what lookups and lists answer with (size, allocation, source, published
 * nodes), in primitive fields, with the node ids shared with the node's view.
 *
 * <p>Kept in memory only: after a restart each agent sends everything at its first registration.
 */
public final class VolumeIndex {

    /**
     * A thing and the node that holds it; {@code made}: this controller's own call made or changed
     * it there, which no node's report can fake (else it is known from the node's report alone).
     */
    public record Located<T>(String nodeId, T item, boolean made) {}

    /**
     * Where an entry sorts: as the string {@code <node>/<name>} (the order of volume and snapshot
     * ids), without making that string for every entry. {@code name} null: the key is {@code node}
     * alone, a point to start from or stop at.
     */
    private record Key(String node, String name) implements Comparable<Key> {

        static Key of(String joined) {
            return new Key(joined, null);
        }

        private int length() {
            return name == null ? node.length() : node.length() + 1 + name.length();
        }

        private char charAt(int i) {
            return i < node.length() ? node.charAt(i) : i == node.length() ? '/' : name.charAt(i - node.length() - 1);
        }

        @Override
        public int compareTo(Key other) {
            int length = Math.min(length(), other.length());
            for (int i = 0; i < length; i++) {
                int difference = charAt(i) - other.charAt(i);
                if (difference != 0) {
                    return difference;
                }
            }
            return length() - other.length();
        }
    }

    /** What an entry keeps, and the generation it is current at. */
    private interface Stored<T> {
        long generation();

        /** Entered or changed by this controller's own call: the node's report alone never sets it. */
        boolean own();

        T item(String name);
    }

    /**
     * A volume without its name (the key holds it), device or IO limits, which no lookup or list
     * answers with; {@code source} null for an empty volume. Its pool, allocation or lvType, and
     * whether it is encrypted stay: a repeated CreateVolume compares them with the request's.
     */
    private record StoredVolume(long capacityBytes, long generation, Allocation allocation, LvType lvType, ContentSource source,
            List<String> publishedNodeIds, PoolKind pool, boolean encrypted, boolean own) implements Stored<Volume> {

        static StoredVolume of(Volume volume, long generation, View view, boolean own) {
            // A local volume is published on its own node only: that one shared list serves nearly all.
            List<String> published = volume.getPublishedNodeIdsCount() == 0 ? List.of()
                    : view.self.equals(volume.getPublishedNodeIdsList()) ? view.self : List.copyOf(volume.getPublishedNodeIdsList());
            return new StoredVolume(volume.getCapacityBytes(), generation, volume.getAllocation(), volume.getLvType(),
                    volume.hasSource() ? volume.getSource() : null, published, volume.getPool(), volume.getEncrypted(), own);
        }

        @Override
        public Volume item(String name) {
            Volume.Builder volume = Volume.newBuilder().setName(name).setCapacityBytes(capacityBytes).setAllocation(allocation)
                    .setLvType(lvType).setPool(pool).setEncrypted(encrypted)
                    .addAllPublishedNodeIds(publishedNodeIds);
            if (source != null) {
                volume.setSource(source);
            }
            return volume.build();
        }
    }

    /** Tombstones of snapshots deleted while a node holding them was down: few, kept as reported. */
    private record StoredTombstone(SnapshotTombstone tombstone, long generation, boolean own) implements Stored<SnapshotTombstone> {

        @Override
        public SnapshotTombstone item(String name) {
            return tombstone;
        }
    }

    /** Snapshots are one or a few per volume at most: kept as reported. */
    private record StoredSnapshot(Snapshot snapshot, long generation, boolean own) implements Stored<Snapshot> {

        @Override
        public Snapshot item(String name) {
            return snapshot;
        }
    }

    /** One node as its agent process reported it; guarded by itself. */
    private static final class View {
        /** The node id every entry of the node shares. */
        private final String nodeId;
        private final List<String> self;
        private String instance = "";
        private long generation = -1;
        private boolean complete;
        /** Names this controller's own calls deleted, with the generation of the deletion, until a report as new says so too. */
        private final Map<String, Long> deletedVolumes = new HashMap<>();
        private final Map<String, Long> deletedSnapshots = new HashMap<>();
        private final Map<String, Long> deletedTombstones = new HashMap<>();

        View(String nodeId) {
            this.nodeId = nodeId;
            this.self = List.of(nodeId);
        }
    }

    /** How the entries of one kind (volumes or snapshots) are kept. */
    private interface Packer<T, S extends Stored<T>> {
        S pack(T item, long generation, View view, boolean own);
    }

    /** Told of every entry entered (and what it replaced) or removed: {@code before} or {@code after} null when there was or is none. */
    private interface Watcher<T> {
        void changed(String nodeId, String name, T before, T after);
    }

    /** Volumes or snapshots: every entry in id order, and which nodes hold each name. */
    private final class Kind<T, S extends Stored<T>> {
        private final Function<T, String> name;
        private final Packer<T, S> packer;
        private final Function<View, Map<String, Long>> deleted;
        private final Watcher<T> watcher;
        /** Everything held: the order of the ids, for pages that cost their own size only. */
        private final ConcurrentSkipListMap<Key, S> sorted = new ConcurrentSkipListMap<>();
        /** Name to the node holding it, or to a list of nodes when two replicas raced (docs/scale.md). */
        private final Map<String, Object> holders = new ConcurrentHashMap<>();

        Kind(Function<T, String> name, Packer<T, S> packer, Function<View, Map<String, Long>> deleted, Watcher<T> watcher) {
            this.name = name;
            this.packer = packer;
            this.deleted = deleted;
            this.watcher = watcher;
        }

        List<Located<T>> find(String wanted) {
            Object held = holders.get(wanted);
            List<Located<T>> found = new ArrayList<>(1);
            for (String nodeId : nodes(held)) {
                S stored = sorted.get(new Key(nodeId, wanted));
                if (stored != null) {
                    found.add(new Located<>(nodeId, stored.item(wanted), stored.own()));
                }
            }
            found.sort(Comparator.comparing(located -> !located.made())); // this controller's own first
            return found;
        }

        @SuppressWarnings("unchecked")
        private static List<String> nodes(Object held) {
            return held == null ? List.of() : held instanceof String nodeId ? List.of(nodeId) : List.copyOf((List<String>) held);
        }

        private ConcurrentNavigableMap<Key, S> of(String nodeId) {
            // Every key of the node starts with "<node>/", and '0' is the character after '/'.
            return sorted.subMap(Key.of(nodeId + "/"), true, Key.of(nodeId + "0"), false);
        }

        List<T> all(String nodeId) {
            return of(nodeId).entrySet().stream().map(entry -> entry.getValue().item(entry.getKey().name())).toList();
        }

        /** Everything at {@code generation}: entries newer than the report stay, the rest follow it. */
        void replace(View view, List<T> reported, long generation) {
            Set<String> names = new HashSet<>();
            reported.forEach(item -> names.add(name.apply(item)));
            for (Key known : of(view.nodeId).keySet()) {
                if (!names.contains(known.name())) {
                    put(view, known.name(), null, generation, false);
                }
            }
            reported.forEach(item -> put(view, name.apply(item), item, generation, false));
        }

        /**
         * Enters {@code item} (null: gone) unless the entry is newer. A report's "gone" removes the
         * entry; an own call's leaves a mark, so that a report older than the call does not bring it back.
         */
        void put(View view, String key, T item, long generation, boolean own) {
            Key at = new Key(view.nodeId, key);
            S known = sorted.get(at);
            Long deletedAt = deleted.apply(view).get(key);
            if (known != null && known.generation() > generation || deletedAt != null && deletedAt > generation) {
                return;
            }
            if (item == null) {
                if (own) {
                    deleted.apply(view).put(key, generation);
                }
                sorted.remove(at);
                release(view.nodeId, key);
            } else {
                deleted.apply(view).remove(key);
                // Once made by this controller, an entry stays its own when a report later confirms it.
                sorted.put(at, packer.pack(item, generation, view, own || known != null && known.own()));
                hold(view.nodeId, key);
            }
            if (known != null || item != null) {
                watcher.changed(view.nodeId, key, known == null ? null : known.item(key), item);
            }
        }

        @SuppressWarnings("unchecked")
        private void hold(String nodeId, String key) {
            holders.compute(key, (ignored, held) -> {
                if (held == null || held.equals(nodeId)) {
                    return nodeId;
                }
                List<String> nodes = new ArrayList<>(held instanceof String other ? List.of(other) : (List<String>) held);
                if (!nodes.contains(nodeId)) {
                    nodes.add(nodeId);
                }
                return List.copyOf(nodes);
            });
        }

        @SuppressWarnings("unchecked")
        private void release(String nodeId, String key) {
            holders.computeIfPresent(key, (ignored, held) -> {
                if (held instanceof String only) {
                    return only.equals(nodeId) ? null : only;
                }
                List<String> nodes = new ArrayList<>((List<String>) held);
                nodes.remove(nodeId);
                return nodes.size() == 1 ? nodes.getFirst() : List.copyOf(nodes);
            });
        }

        /** Drops the marks of deletions a report at {@code generation} includes. */
        void settle(View view, long generation) {
            deleted.apply(view).values().removeIf(deletedAt -> deletedAt <= generation);
        }

        void forget(View view) {
            var entries = of(view.nodeId);
            entries.forEach((key, stored) -> watcher.changed(view.nodeId, key.name(), stored.item(key.name()), null));
            entries.keySet().forEach(key -> release(view.nodeId, key.name()));
            entries.clear();
            deleted.apply(view).clear();
        }

        /**
         * Another agent process of the node: its entries stay (and whether this controller made
         * them), but at no generation, so that the new process's first report decides.
         */
        void restart(View view) {
            of(view.nodeId).replaceAll((key, stored) -> packer.pack(stored.item(key.name()), -1, view, stored.own()));
            deleted.apply(view).clear();
        }

        List<Located<T>> from(String nodeAndName, int limit) {
            List<Located<T>> page = new ArrayList<>(Math.min(limit, 1024));
            for (var entry : sorted.tailMap(Key.of(nodeAndName), true).entrySet()) {
                if (page.size() >= limit) {
                    break;
                }
                page.add(new Located<>(entry.getKey().node(), entry.getValue().item(entry.getKey().name()), entry.getValue().own()));
            }
            return page;
        }
    }

    private final Map<String, View> views = new ConcurrentHashMap<>();
    private final Kind<Volume, StoredVolume> volumes = new Kind<>(Volume::getName, StoredVolume::of, view -> view.deletedVolumes,
            (nodeId, name, before, after) -> { });
    /**
     * Snapshots kept on other nodes than the one that took them (Snapshot.origin_node: copies), by
     * the origin's {@code <node>/<name>}: the nodes holding a complete copy. So a snapshot whose
     * node is gone is found, and listed in the order of its id, from its copies.
     */
    private final ConcurrentSkipListMap<Key, Set<String>> copies = new ConcurrentSkipListMap<>();
    private final Kind<Snapshot, StoredSnapshot> snapshots = new Kind<Snapshot, StoredSnapshot>(Snapshot::getName,
            (snapshot, generation, view, own) -> new StoredSnapshot(snapshot, generation, own), view -> view.deletedSnapshots,
            this::copyChanged);

    private void copyChanged(String nodeId, String name, Snapshot before, Snapshot after) {
        if (before != null && !before.getOriginNode().isEmpty()) {
            copies.computeIfPresent(new Key(before.getOriginNode(), name), (key, nodes) -> {
                Set<String> left = new TreeSet<>(nodes);
                left.remove(nodeId);
                return left.isEmpty() ? null : Set.copyOf(left);
            });
        }
        if (after != null && !after.getOriginNode().isEmpty()) {
            copies.compute(new Key(after.getOriginNode(), name), (key, nodes) -> {
                Set<String> held = new TreeSet<>(nodes == null ? Set.of() : nodes);
                held.add(nodeId);
                return Set.copyOf(held);
            });
        }
    }

    private final Kind<SnapshotTombstone, StoredTombstone> tombstones = new Kind<SnapshotTombstone, StoredTombstone>(
            SnapshotTombstone::getName, (tombstone, generation, view, own) -> new StoredTombstone(tombstone, generation, own),
            view -> view.deletedTombstones, (nodeId, name, before, after) -> { });

    /** A snapshot as the node that took it names it: its id is {@code local-snapshot/<origin>/<name>}. */
    public record SnapshotKey(String originNode, String name) {}

    private View view(String nodeId) {
        return views.computeIfAbsent(nodeId, View::new);
    }

    /** Applies a registration's report; true when the agent must send everything (its changes do not follow this view). */
    boolean report(RegisterRequest request) {
        View view = view(request.getNodeId());
        synchronized (view) {
            if (!view.instance.equals(request.getInstance())) {
                view.instance = request.getInstance(); // another agent process: its generations start again
                view.complete = false;
                view.generation = -1;
                // No entry of the process before may count as newer than this one's reports.
                volumes.restart(view);
                snapshots.restart(view);
                tombstones.restart(view);
            }
            long generation = request.getGeneration();
            if (request.hasInventory()) {
                volumes.replace(view, request.getInventory().getVolumesList(), generation);
                snapshots.replace(view, request.getInventory().getSnapshotsList(), generation);
                tombstones.replace(view, request.getInventory().getTombstonesList(), generation);
                view.complete = true;
            } else if (request.hasChanges()) {
                InventoryChanges changes = request.getChanges();
                if (!view.complete || changes.getBaseGeneration() != view.generation) {
                    return true;
                }
                changes.getVolumesList().forEach(volume -> volumes.put(view, volume.getName(), volume, generation, false));
                changes.getRemovedVolumesList().forEach(name -> volumes.put(view, name, null, generation, false));
                changes.getSnapshotsList().forEach(snapshot -> snapshots.put(view, snapshot.getName(), snapshot, generation, false));
                changes.getRemovedSnapshotsList().forEach(name -> snapshots.put(view, name, null, generation, false));
                changes.getTombstonesList().forEach(tombstone -> tombstones.put(view, tombstone.getName(), tombstone, generation, false));
                changes.getRemovedTombstonesList().forEach(name -> tombstones.put(view, name, null, generation, false));
            } else {
                return !view.complete || generation != view.generation;
            }
            view.generation = generation;
            volumes.settle(view, generation);
            snapshots.settle(view, generation);
            tombstones.settle(view, generation);
            return false;
        }
    }

    /** What this controller's own call to {@code nodeId} made of volume {@code name} (null: deleted), at the agent's generation. */
    public void volume(String nodeId, String name, Volume volume, long generation) {
        own(nodeId, view -> volumes.put(view, name, volume, generation, true));
    }

    public void snapshot(String nodeId, String name, Snapshot snapshot, long generation) {
        own(nodeId, view -> snapshots.put(view, name, snapshot, generation, true));
    }

    /** What this controller's DeleteSnapshot to {@code nodeId} left of the tombstone {@code name} (null: none). */
    public void tombstone(String nodeId, String name, SnapshotTombstone tombstone, long generation) {
        own(nodeId, view -> tombstones.put(view, name, tombstone, generation, true));
    }

    /** The tombstones of the snapshot {@code name}, each with the node that keeps it. */
    public List<Located<SnapshotTombstone>> tombstones(String name) {
        return tombstones.find(name);
    }

    /** Every tombstone, with the node that keeps it. */
    public List<Located<SnapshotTombstone>> tombstones() {
        return tombstones.from("", Integer.MAX_VALUE);
    }

    private void own(String nodeId, Consumer<View> change) {
        View view = view(nodeId);
        synchronized (view) {
            change.accept(view);
        }
    }

    /** Whether the agent process of {@code nodeId} has reported everything. */
    boolean complete(String nodeId) {
        View view = views.get(nodeId);
        if (view == null) {
            return false;
        }
        synchronized (view) {
            return view.complete;
        }
    }

    /**
     * The nodes the index places volume {@code name} on, with the volume each holds (name, size,
     * allocation, source, published nodes): those this controller made it on first.
     */
    public List<Located<Volume>> volumes(String name) {
        return volumes.find(name);
    }

    public List<Located<Snapshot>> snapshots(String name) {
        return snapshots.find(name);
    }

    /** At most {@code limit} volumes in the order of {@code <node>/<name>}, from {@code nodeAndName} on. */
    public List<Located<Volume>> volumesFrom(String nodeAndName, int limit) {
        return volumes.from(nodeAndName, limit);
    }

    /** At most {@code limit} snapshots in the order of {@code <node>/<name>}, from {@code nodeAndName} on. */
    public List<Located<Snapshot>> snapshotsFrom(String nodeAndName, int limit) {
        return snapshots.from(nodeAndName, limit);
    }

    /** The copies of the snapshot {@code name} that {@code originNode} took, kept complete on other nodes (none: empty). */
    public List<Located<Snapshot>> copiesOf(String originNode, String name) {
        return snapshots.find(name).stream()
                .filter(located -> located.item().getOriginNode().equals(originNode) && !located.nodeId().equals(originNode))
                .toList();
    }

    /**
     * At most {@code limit} snapshots that have copies on other nodes, in the order of the
     * origin's {@code <node>/<name>}, from {@code originAndName} on.
     */
    public List<SnapshotKey> copiedFrom(String originAndName, int limit) {
        List<SnapshotKey> page = new ArrayList<>(Math.min(limit, 1024));
        for (Key key : copies.tailMap(Key.of(originAndName), true).keySet()) {
            if (page.size() >= limit) {
                break;
            }
            page.add(new SnapshotKey(key.node(), key.name()));
        }
        return page;
    }

    /** The snapshots of {@code nodeId}, in name order. */
    public List<Snapshot> snapshotsOf(String nodeId) {
        return snapshots.all(nodeId);
    }

    /** A node removed from the cluster: nothing of it is found or listed any more. */
    void forget(String nodeId) {
        View view = views.remove(nodeId);
        if (view != null) {
            synchronized (view) {
                volumes.forget(view);
                snapshots.forget(view);
                tombstones.forget(view);
            }
        }
    }
}
