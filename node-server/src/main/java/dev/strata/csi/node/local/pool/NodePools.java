package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The pools of this node: the image pool, and an LVM pool when node-server names a volume group.
 * On a node with the LVM pool only ({@code --image-pool=false}) the image pool's directory is
 * still there, holding the agent's lock and the LVM pool's records, and serves the image volumes
 * made before, if any, until they are deleted; it takes no new one and reports no capacity.
 * Volume names, and snapshot names, are one namespace across them: a volume belongs to the
 * pool that has a record of its name, so a call names the volume only (its id stays
 * {@code local/<node>/<name>} whatever the pool), and a new volume or snapshot whose name another
 * pool holds is ALREADY_EXISTS.
 */
public final class NodePools {

    private final ImagePool images;
    /** Whether new volumes go into the image pool: false on an LVM-only node. */
    private final boolean imageVolumes;
    private final Optional<LvmPool> lvm;

    public NodePools(ImagePool images, Optional<LvmPool> lvm) {
        this(images, true, lvm);
    }

    public NodePools(ImagePool images, boolean imageVolumes, Optional<LvmPool> lvm) {
        if (!imageVolumes && lvm.isEmpty()) {
            throw new IllegalArgumentException("a node without an image pool needs an LVM pool");
        }
        this.images = images;
        this.imageVolumes = imageVolumes;
        this.lvm = lvm;
    }

    /** The image pool: its directory holds the agent's lock. */
    public ImagePool images() {
        return images;
    }

    public List<VolumePool> all() {
        List<VolumePool> all = new ArrayList<>(List.of(images));
        lvm.ifPresent(all::add);
        return all;
    }

    /** The pool of that kind for a new volume (unspecified: the image pool); FAILED_PRECONDITION when this node has none. */
    public VolumePool of(PoolKind kind) {
        return switch (kind) {
            case POOL_LVM -> lvm.orElseThrow(() -> CsiException.failedPrecondition(
                    "this node has no LVM pool: its node-server was started without --volume-group"));
            case POOL_IMAGE, POOL_KIND_UNSPECIFIED -> {
                if (!imageVolumes) {
                    throw CsiException.failedPrecondition("this node has no image pool: its node-server runs with --image-pool=false");
                }
                yield images;
            }
            case UNRECOGNIZED -> throw CsiException.invalidArgument("unknown pool kind");
        };
    }

    /** The pool volume {@code name} belongs to: the one with its record; the image pool when none has one. */
    public VolumePool holding(String name) throws IOException {
        return find(name).orElse(images);
    }

    /** The pool with a record of volume {@code name}, if any has one. */
    public Optional<VolumePool> find(String name) throws IOException {
        for (VolumePool pool : all()) {
            if (pool.holds(name)) {
                return Optional.of(pool);
            }
        }
        return Optional.empty();
    }

    /** The pool of {@code kind} for new volume {@code name}; ALREADY_EXISTS when another pool has the name. */
    public VolumePool forNew(String name, PoolKind kind) throws IOException {
        VolumePool wanted = of(kind);
        for (VolumePool pool : all()) {
            if (pool != wanted && pool.holds(name)) {
                throw CsiException.alreadyExists("volume " + name + " exists in this node's " + describe(pool.kind())
                        + ", not in its " + describe(wanted.kind()));
            }
        }
        return wanted;
    }

    /** The pool snapshot {@code name} belongs to: the one with its record; the image pool when none has one. */
    public VolumePool holdingSnapshot(String name) throws IOException {
        return findSnapshot(name).orElse(images);
    }

    /** The pool with a record of snapshot {@code name}, if any has one. */
    public Optional<VolumePool> findSnapshot(String name) throws IOException {
        for (VolumePool pool : all()) {
            if (pool.snapshots().holds(name)) {
                return Optional.of(pool);
            }
        }
        return Optional.empty();
    }

    /** The pool for new snapshot {@code name} of volume {@code sourceImage}: the volume's; ALREADY_EXISTS when another pool has the name. */
    public VolumePool forNewSnapshot(String name, String sourceImage) throws IOException {
        VolumePool wanted = holding(sourceImage);
        for (VolumePool pool : all()) {
            if (pool != wanted && pool.snapshots().holds(name)) {
                throw CsiException.alreadyExists("snapshot " + name + " exists in this node's " + describe(pool.kind())
                        + ", not of volume " + sourceImage);
            }
        }
        return wanted;
    }

    /** The pool of {@code kind} for a copy of another node's snapshot {@code name}; ALREADY_EXISTS when another pool has the name. */
    public VolumePool forSnapshotCopy(String name, PoolKind kind) throws IOException {
        VolumePool wanted = of(kind);
        for (VolumePool pool : all()) {
            if (pool != wanted && pool.snapshots().holds(name)) {
                throw CsiException.alreadyExists("snapshot " + name + " exists in this node's " + describe(pool.kind())
                        + ", not in its " + describe(wanted.kind()));
            }
        }
        return wanted;
    }

    public Optional<Volume> get(String name) throws IOException, DeviceException {
        return holding(name).get(name);
    }

    /** Every pool's volumes. */
    public List<Volume> list() throws IOException, DeviceException {
        List<Volume> all = new ArrayList<>();
        for (VolumePool pool : all()) {
            all.addAll(pool.list());
        }
        return all;
    }

    /** Every pool's listed snapshots. */
    public List<Snapshot> snapshots() throws IOException {
        List<Snapshot> all = new ArrayList<>();
        for (VolumePool pool : all()) {
            all.addAll(pool.snapshots().list());
        }
        return all;
    }

    public Optional<Snapshot> listedSnapshot(String name) throws IOException {
        return holdingSnapshot(name).snapshots().listed(name);
    }

    /**
     * The image pool's status, as a registration's {@code pool} field carries it: on an LVM-only
     * node, nothing, so that no image volume is placed there.
     */
    public PoolStatus imageStatus() throws IOException, DeviceException {
        return imageVolumes ? images.status() : PoolStatus.newBuilder().setKind(PoolKind.POOL_IMAGE).build();
    }

    /** The status of each pool that takes new volumes, the image pool's first: the pools the controller may place volumes in. */
    public List<PoolStatus> statuses() throws IOException, DeviceException {
        List<PoolStatus> all = new ArrayList<>();
        for (VolumePool pool : all()) {
            if (pool == images && !imageVolumes) {
                continue;
            }
            PoolStatus status = pool.status();
            all.add(status.getKind() == pool.kind() ? status : status.toBuilder().setKind(pool.kind()).build());
        }
        return all;
    }

    /** Freezes the mounted filesystems of {@code volumes} of this node together, for a group snapshot's cut. */
    public FrozenVolumes freeze(List<String> volumes) throws IOException, DeviceException, MountException {
        return FrozenVolumes.freeze(this, volumes);
    }

    /** Marks group {@code group}'s members in every pool committed; returns them. */
    public List<Snapshot> commitGroup(String group) throws IOException {
        List<Snapshot> members = new ArrayList<>();
        for (VolumePool pool : all()) {
            members.addAll(pool.snapshots().commit(group));
        }
        return members;
    }

    /** At start, before any call: every pool brought in line with its records. */
    public void reconcile() throws IOException, DeviceException, MountException {
        for (VolumePool pool : all()) {
            pool.reconcile();
        }
    }

    public static String describe(PoolKind kind) {
        return kind == PoolKind.POOL_LVM ? "LVM pool" : "image pool";
    }
}
