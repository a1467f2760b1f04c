package dev.strata.csi.node.local.pool;

import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.BlockRange;
import dev.strata.csi.node.local.blocks.ChangedBlocks;
import dev.strata.csi.node.local.blocks.RangeSink;
import dev.strata.csi.node.local.blocks.RangeWriter;
import dev.strata.csi.node.local.lvm.LogicalVolumes;
import dev.strata.csi.node.local.lvm.ThinMappings;
import java.util.List;

/**
 * The LVM pool's changed-block engine, on its thin snapshots: the thin pool's mappings
 * ({@link ThinMappings}), whole chunks of the pool (64 KiB by default), never a read of data. A
 * chunk written since the base, even with the same bytes, counts as changed.
 */
final class ThinChangedBlocks implements ChangedBlocks {

    private final LvmPool pool;
    private final LogicalVolumes volumes;
    private final ThinMappings mappings;

    ThinChangedBlocks(LvmPool pool, LogicalVolumes volumes, ThinMappings mappings) {
        this.pool = pool;
        this.volumes = volumes;
        this.mappings = mappings;
    }

    @Override
    public void allocated(SnapshotRecord snapshot, long from, RangeSink sink) throws DeviceException, InterruptedException {
        write(mappings.mapped(id(snapshot)), from, snapshot.getCapacityBytes(), sink);
    }

    @Override
    public void changed(SnapshotRecord base, SnapshotRecord target, long from, RangeSink sink)
            throws DeviceException, InterruptedException {
        write(mappings.differing(id(base), id(target)), from, target.getCapacityBytes(), sink);
    }

    private long id(SnapshotRecord snapshot) throws DeviceException {
        return volumes.thinId(pool.lv(LvmPool.SNAPSHOT_PREFIX + snapshot.getName()));
    }

    private static void write(List<BlockRange> ranges, long from, long capacity, RangeSink sink) throws InterruptedException {
        RangeWriter out = new RangeWriter(sink, ImageChangedBlocks.aligned(from), capacity);
        for (BlockRange range : ranges) {
            out.add(range.offset(), range.end());
        }
        out.finish();
    }
}
