package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.BlockDevice;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.ChangedBlocks;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * One kind of storage a node keeps its local volumes in: {@link ImagePool} (image files on loop
 * devices) or {@link LvmPool} (logical volumes). What the node agent and the node backend ask of a
 * pool, in the storage vocabulary: a volume is created, attached (its block device appears on this
 * node), expanded, detached and deleted; its snapshots are the pool's own. Every volume has a
 * record (local_record.proto) that holds its desired state and what it holds; each call writes
 * its intent there before it acts, and {@link #reconcile()} at start completes what a crash cut
 * short. Callers serialise the calls per volume name; names are one namespace across a node's
 * pools ({@link NodePools}).
 */
public interface VolumePool {

    PoolKind kind();

    /** The records of the pool's volumes: what each is to be, and what it holds. */
    RecordStore records();

    /** Whether the pool has a record of volume {@code name}, in any state: the pool it belongs to. */
    default boolean holds(String name) throws IOException {
        return records().read(name).isPresent();
    }

    /**
     * Creates the volume, empty or with the content of {@code source} (a snapshot or a volume of
     * this pool), or returns it when it exists with the same size, allocation or type, and source.
     * {@code allocation}: the image pool's; {@code lvType}: the LVM pool's; each pool ignores the other's.
     * {@code overcommitRatio}: a thin logical volume admitted while the sizes of every thin volume
     * and snapshot stay within that many times the thin pool's size (LVM; 1: no overcommit; the
     * image pool never overcommits, INVALID_ARGUMENT above 1). {@code encrypted}: recorded, so that
     * the node stages it only through its dm-crypt mapping; a copy's source must be the same.
     */
    Volume create(String name, long capacityBytes, Allocation allocation, LvType lvType, Optional<ContentSource> source,
            boolean encrypted, double overcommitRatio)
            throws IOException, DeviceException, MountException;

    /** Deletes the volume and its record; succeeds when already gone. FAILED_PRECONDITION while mounted. */
    void delete(String name) throws IOException, DeviceException, MountException;

    /** Makes the volume's block device on this node for {@code nodeId}, or returns the one there is. */
    Volume attach(String name, String nodeId) throws IOException, DeviceException, MountException;

    /** Takes the volume's block device away; succeeds when there is none. FAILED_PRECONDITION while mounted. */
    void detach(String name, String nodeId) throws IOException, DeviceException, MountException;

    /** Grows the volume, and its device when attached, to {@code capacityBytes}; never shrinks. */
    Volume expand(String name, long capacityBytes) throws IOException, DeviceException, MountException;

    /** Whether the volume exists and is ready, as its record says; cheaper than {@link #get}, which finds its device. */
    default boolean exists(String name) throws IOException {
        return records().read(name).filter(record -> record.getState() == ImageRecord.State.READY).isPresent();
    }

    Optional<Volume> get(String name) throws IOException, DeviceException;

    List<Volume> list() throws IOException, DeviceException;

    /** What a new volume can safely get. */
    PoolStatus status() throws IOException, DeviceException;

    /** At start, before any call: brings the system in line with the records. */
    void reconcile() throws IOException, DeviceException, MountException;

    VolumeSnapshots snapshots();

    /** The copies the pool receives from other nodes (ReceiveVolume, WriteContent). */
    IncomingCopies incoming();

    /** The copies of other nodes' snapshots the pool receives and keeps (ReceiveSnapshotCopy, WriteSnapshotCopy). */
    SnapshotCopies snapshotCopies();

    /** The copies of the pool's volumes and snapshots that other nodes receive (ReadContent). */
    OutgoingCopies outgoing();

    /** The pool's changed-block engine, on its snapshots (the SnapshotMetadata service, incremental copies). */
    ChangedBlocks changedBlocks();

    /** The device that stage and publish use: the one holding the volume's storage now, if attached. */
    Optional<? extends BlockDevice> attachedDevice(String name) throws IOException, DeviceException;

    /**
     * A device still holding the volume, if any: the attached one, or, where the pool can tell, one
     * whose storage was removed from under it. What unstage, unpublish and stats look for.
     */
    Optional<? extends BlockDevice> device(String name) throws IOException, DeviceException;

    /**
     * Where the volume's filesystem is mounted on this node, if it is: a mount its device backs, not
     * a block volume's bind. What a copy and a group snapshot's cut freeze.
     */
    Optional<Path> filesystemMount(String name) throws IOException, DeviceException, MountException;

    /** The size of the volume's {@code device} as the kernel sees it. */
    long deviceBytes(BlockDevice device) throws DeviceException;

    /** Makes the attached {@code device} take the volume's recorded size, where it does not by itself. */
    void refreshDevice(BlockDevice device) throws DeviceException;

    /** Why a mounted volume is not healthy (its storage or its record gone), or empty when it is. */
    Optional<String> abnormality(String name) throws IOException, DeviceException;

    /** What the volume holds as far as the driver knows: the record of a READY volume; NOT_FOUND otherwise. */
    default ImageRecord content(String name) throws IOException {
        return records().ready(name);
    }
}
