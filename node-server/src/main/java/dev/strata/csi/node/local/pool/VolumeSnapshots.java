package dev.strata.csi.node.local.pool;

import com.google.protobuf.Timestamp;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.backend.local.records.SnapshotGroup;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;
import java.util.List;
import java.util.Optional;

/**
 * A pool's snapshots: each independent of its volume once taken, kept after the volume is
 * deleted. Callers lock a snapshot's name ({@link PoolSnapshots#lockKey}) as they lock a volume's,
 * and take a snapshot with its source volume's lock held.
 */
public interface VolumeSnapshots {

    /**
     * Takes a snapshot of volume {@code sourceImage} under {@code name}, or returns the snapshot
     * when it exists of the same volume (another volume's: ALREADY_EXISTS). A {@code temporary}
     * one, taken for a copy to another node, is not listed and is removed at the next start.
     */
    default Snapshot take(String name, String sourceImage, boolean temporary) throws IOException, DeviceException, MountException {
        return take(name, sourceImage, temporary, Optional.empty());
    }

    /**
     * {@link #take(String, String, boolean)}, recording {@code copyNodes}: the nodes to keep copies
     * of it. A snapshot that exists keeps the nodes it recorded, and reports them.
     */
    default Snapshot take(String name, String sourceImage, boolean temporary, List<String> copyNodes)
            throws IOException, DeviceException, MountException {
        Pending pending = prepare(name, sourceImage, temporary, copyNodes, Optional.empty());
        pending.copy();
        return pending.finish();
    }

    /** A group snapshot's member: its group, uncommitted, and the cut's time, which is the member's creation time. */
    record Membership(SnapshotGroup group, Timestamp cut) {}

    /**
     * {@link #take(String, String, boolean)}, as a member of a group snapshot when {@code member}
     * says so: the same name as a member of another group, or of none, is ALREADY_EXISTS.
     */
    default Snapshot take(String name, String sourceImage, boolean temporary, Optional<Membership> member)
            throws IOException, DeviceException, MountException {
        Pending pending = prepare(name, sourceImage, temporary, List.of(), member);
        pending.copy();
        return pending.finish();
    }

    /**
     * A snapshot being taken, in its three steps: recorded (CREATING) by {@link #prepare}, its
     * content copied as it is at {@link #copy} (a group snapshot's cut copies every member while
     * their filesystems are frozen, and records nothing then), READY at {@link #finish}. A crash
     * between them leaves a CREATING record, which the retry or the next start removes.
     */
    interface Pending {
        /** Whether {@link #prepare} recorded it: false for a snapshot that was there already. */
        boolean fresh();

        void copy() throws IOException, DeviceException, MountException;

        Snapshot finish() throws IOException;
    }

    /** The first step of {@link #take(String, String, boolean, Optional)}: the checks and the record, with {@code copyNodes}. */
    Pending prepare(String name, String sourceImage, boolean temporary, List<String> copyNodes, Optional<Membership> member)
            throws IOException, DeviceException, MountException;

    /** Marks the members of group {@code group} in this pool committed; returns them. Repeating it changes nothing. */
    List<Snapshot> commit(String group) throws IOException;

    /** Deletes the snapshot; succeeds when already gone. */
    void delete(String name) throws IOException, DeviceException, MountException;

    /** Whether the pool has a record of snapshot {@code name}, in any state. */
    boolean holds(String name) throws IOException;

    /** The pool's complete snapshots, but the temporary ones. */
    List<Snapshot> list() throws IOException;

    /** The record of the READY snapshot {@code name}; NOT_FOUND when there is none. */
    SnapshotRecord ready(String name) throws IOException;

    /** Snapshot {@code name} when {@link #list} would list it. */
    Optional<Snapshot> listed(String name) throws IOException;
}
