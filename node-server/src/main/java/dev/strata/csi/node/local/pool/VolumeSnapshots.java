package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Snapshot;
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
    Snapshot take(String name, String sourceImage, boolean temporary) throws IOException, DeviceException, MountException;

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
