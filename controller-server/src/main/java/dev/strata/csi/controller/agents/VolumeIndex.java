package dev.strata.csi.controller.agents;

import dev.strata.csi.agent.api.Image;
import dev.strata.csi.agent.api.InventoryChanges;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.Snapshot;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.function.Function;

/**
 * Where every volume and snapshot is, as the node agents report it ({@code Inventory} in
 * node-server): each node's images and listable snapshots, complete once its agent process sent
 * everything, current as of the generation of its last report. The controller's own calls enter
 * their results too, with the generation the agent gave in its reply: an entry newer than a report
 * (a create answered while an older report was on its way) is kept over it, so a report never
 * takes back what this replica has seen done.
 *
 * <p>Kept in memory only: after a restart each agent sends everything at its first registration.
 */
public final class VolumeIndex {

    /** A thing and the node that holds it. */
    public record Located<T>(String nodeId, T item) {}

    /** A thing at a generation; {@code item} null: deleted by this controller's call, until a report as new says so too. */
    private record Entry<T>(T item, long generation) {}

    /** One node as its agent process reported it; guarded by itself. */
    private static final class View {
        private String instance = "";
        private long generation = -1;
        private boolean complete;
        private final Map<String, Entry<Image>> images = new HashMap<>();
        private final Map<String, Entry<Snapshot>> snapshots = new HashMap<>();
    }

    /** Images or snapshots: where each view keeps them, and which nodes hold each name. */
    private final class Kind<T> {
        private final Function<View, Map<String, Entry<T>>> of;
        private final Function<T, String> name;
        /** Name to the nodes whose view holds it: one, unless two replicas raced (docs/scale.md). */
        private final Map<String, Set<String>> holders = new ConcurrentHashMap<>();
        /** Everything held, by {@code <node>/<name>}: the order of the ids, for pages that cost their own size only. */
        private final ConcurrentSkipListMap<String, Located<T>> sorted = new ConcurrentSkipListMap<>();

        Kind(Function<View, Map<String, Entry<T>>> of, Function<T, String> name) {
            this.of = of;
            this.name = name;
        }

        List<Located<T>> find(String wanted) {
            Set<String> nodes = holders.get(wanted);
            if (nodes == null) {
                return List.of();
            }
            List<Located<T>> found = new ArrayList<>();
            for (String nodeId : Set.copyOf(nodes)) {
                View view = views.get(nodeId);
                if (view != null) {
                    synchronized (view) {
                        Entry<T> entry = of.apply(view).get(wanted);
                        if (entry != null && entry.item() != null) {
                            found.add(new Located<>(nodeId, entry.item()));
                        }
                    }
                }
            }
            return found;
        }

        List<T> all(String nodeId) {
            View view = views.get(nodeId);
            if (view == null) {
                return List.of();
            }
            synchronized (view) {
                return of.apply(view).values().stream().map(Entry::item).filter(item -> item != null).toList();
            }
        }

        /** Everything at {@code generation}: entries newer than the report stay, the rest follow it. */
        void replace(String nodeId, View view, List<T> reported, long generation) {
            Map<String, T> byName = new HashMap<>();
            reported.forEach(item -> byName.put(name.apply(item), item));
            for (String known : List.copyOf(of.apply(view).keySet())) {
                if (!byName.containsKey(known)) {
                    put(nodeId, view, known, null, generation, false);
                }
            }
            byName.forEach((key, item) -> put(nodeId, view, key, item, generation, false));
        }

        /**
         * Enters {@code item} (null: gone) unless the entry is newer. A report's "gone" removes the
         * entry; an own call's leaves a mark, so that a report older than the call does not bring it back.
         */
        void put(String nodeId, View view, String key, T item, long generation, boolean own) {
            Map<String, Entry<T>> entries = of.apply(view);
            Entry<T> known = entries.get(key);
            if (known != null && known.generation() > generation) {
                return;
            }
            if (item == null) {
                if (own) {
                    entries.put(key, new Entry<>(null, generation));
                } else {
                    entries.remove(key);
                }
                holders.computeIfPresent(key, (ignored, nodes) -> {
                    nodes.remove(nodeId);
                    return nodes.isEmpty() ? null : nodes;
                });
                sorted.remove(nodeId + "/" + key);
            } else {
                entries.put(key, new Entry<>(item, generation));
                holders.computeIfAbsent(key, ignored -> ConcurrentHashMap.newKeySet()).add(nodeId);
                sorted.put(nodeId + "/" + key, new Located<>(nodeId, item));
            }
        }

        /** Drops the marks of deletions a report at {@code generation} includes. */
        void settle(View view, long generation) {
            of.apply(view).values().removeIf(entry -> entry.item() == null && entry.generation() <= generation);
        }

        void forget(String nodeId, View view) {
            of.apply(view).keySet().forEach(key -> {
                holders.computeIfPresent(key, (ignored, nodes) -> {
                    nodes.remove(nodeId);
                    return nodes.isEmpty() ? null : nodes;
                });
                sorted.remove(nodeId + "/" + key);
            });
        }

        List<Located<T>> from(String nodeAndName, int limit) {
            return sorted.tailMap(nodeAndName, true).values().stream().limit(limit).toList();
        }
    }

    private final Map<String, View> views = new ConcurrentHashMap<>();
    private final Kind<Image> images = new Kind<>(view -> view.images, Image::getName);
    private final Kind<Snapshot> snapshots = new Kind<>(view -> view.snapshots, Snapshot::getName);

    /** Applies a registration's report; true when the agent must send everything (its changes do not follow this view). */
    boolean report(RegisterRequest request) {
        String nodeId = request.getNodeId();
        View view = views.computeIfAbsent(nodeId, id -> new View());
        synchronized (view) {
            if (!view.instance.equals(request.getInstance())) {
                view.instance = request.getInstance(); // another agent process: its generations start again
                view.complete = false;
                view.generation = -1;
            }
            long generation = request.getGeneration();
            if (request.hasInventory()) {
                images.replace(nodeId, view, request.getInventory().getImagesList(), generation);
                snapshots.replace(nodeId, view, request.getInventory().getSnapshotsList(), generation);
                view.complete = true;
            } else if (request.hasChanges()) {
                InventoryChanges changes = request.getChanges();
                if (!view.complete || changes.getBaseGeneration() != view.generation) {
                    return true;
                }
                changes.getImagesList().forEach(image -> images.put(nodeId, view, image.getName(), image, generation, false));
                changes.getRemovedImagesList().forEach(name -> images.put(nodeId, view, name, null, generation, false));
                changes.getSnapshotsList().forEach(snapshot ->
                        snapshots.put(nodeId, view, snapshot.getName(), snapshot, generation, false));
                changes.getRemovedSnapshotsList().forEach(name -> snapshots.put(nodeId, view, name, null, generation, false));
            } else {
                return !view.complete || generation != view.generation;
            }
            view.generation = generation;
            images.settle(view, generation);
            snapshots.settle(view, generation);
            return false;
        }
    }

    /** What this controller's own call to {@code nodeId} made of image {@code name} (null: deleted), at the agent's generation. */
    public void image(String nodeId, String name, Image image, long generation) {
        own(nodeId, view -> images.put(nodeId, view, name, image, generation, true));
    }

    public void snapshot(String nodeId, String name, Snapshot snapshot, long generation) {
        own(nodeId, view -> snapshots.put(nodeId, view, name, snapshot, generation, true));
    }

    private void own(String nodeId, java.util.function.Consumer<View> change) {
        View view = views.computeIfAbsent(nodeId, id -> new View());
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

    /** The nodes the index places image {@code name} on, with the image each holds. */
    public List<Located<Image>> images(String name) {
        return images.find(name);
    }

    public List<Located<Snapshot>> snapshots(String name) {
        return snapshots.find(name);
    }

    /** At most {@code limit} images in the order of {@code <node>/<name>}, from {@code nodeAndName} on. */
    public List<Located<Image>> imagesFrom(String nodeAndName, int limit) {
        return images.from(nodeAndName, limit);
    }

    public List<Image> imagesOf(String nodeId) {
        return images.all(nodeId);
    }

    public List<Snapshot> snapshotsOf(String nodeId) {
        return snapshots.all(nodeId);
    }

    /** A node removed from the cluster: nothing of it is found or listed any more. */
    void forget(String nodeId) {
        View view = views.remove(nodeId);
        if (view != null) {
            synchronized (view) {
                images.forget(nodeId, view);
                snapshots.forget(nodeId, view);
            }
        }
    }
}
