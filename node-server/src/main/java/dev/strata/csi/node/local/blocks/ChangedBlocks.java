package dev.strata.csi.node.local.blocks;

import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;

/**
 * A pool's changed-block engine: which ranges of a snapshot hold data, and which ranges differ
 * between two snapshots of one volume, from the pool's own metadata wherever it can tell (shared
 * extents of reflinked image files, a thin pool's mappings) and by reading the data only where it
 * cannot. Used by the SnapshotMetadata service and by incremental copies between nodes. Both
 * answers err only on the side of more: a changed block is never left out. Ranges go to the sink
 * in ascending order, within the (target) snapshot's capacity, those ending at or before
 * {@code from} left out and one spanning it cut there. The caller holds the snapshots' locks and
 * has checked that both are READY snapshots of the same volume, the base taken first.
 */
public interface ChangedBlocks {

    void allocated(SnapshotRecord snapshot, long from, RangeSink sink) throws IOException, DeviceException, InterruptedException;

    void changed(SnapshotRecord base, SnapshotRecord target, long from, RangeSink sink)
            throws IOException, DeviceException, InterruptedException;
}
