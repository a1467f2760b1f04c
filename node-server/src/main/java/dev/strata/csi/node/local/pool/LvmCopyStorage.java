package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.lvm.LogicalVolumes;
import dev.strata.csi.node.local.lvm.LogicalVolumes.LogicalVolume;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.util.Optional;

/**
 * The LVM pool's snapshot copies: a thin volume named as its own snapshots are, new and empty, or a
 * thin snapshot of the base copy's volume, sharing its blocks; a range the source reads as zeros
 * is discarded, which unmaps the thin pool's chunks it covers whole (a hole again), and zeros are
 * written where its ends leave data. Thin, whatever the volume's type on its origin node: a thin pool that does not zero new
 * chunks takes no copy, as it takes no new thin volume. Activated for each stream, deactivated after.
 */
final class LvmCopyStorage implements SnapshotCopies.Storage {

    private final LvmPool pool;
    private final LogicalVolumes volumes;

    LvmCopyStorage(LvmPool pool, LogicalVolumes volumes) {
        this.pool = pool;
        this.volumes = volumes;
    }

    @Override
    public PoolKind kind() {
        return PoolKind.POOL_LVM;
    }

    @Override
    public void reserve(SnapshotRecord record) throws IOException, DeviceException {
        pool.lv(LvmPool.SNAPSHOT_PREFIX + record.getName());
        if (!volumes.thinPoolZeroes()) {
            throw CsiException.failedPrecondition("a copy of snapshot " + record.getName() + ": " + LvmPool.THIN_POOL_WITHOUT_ZEROING);
        }
        pool.reserveSnapshot("a copy of snapshot " + record.getName(), record, 0);
    }

    @Override
    public boolean create(SnapshotRecord record, Optional<SnapshotRecord> base) throws IOException, DeviceException {
        String lv = lv(record);
        remove(record);
        if (base.isEmpty()) {
            volumes.createThin(lv, record.getCapacityBytes());
            return false;
        }
        volumes.snapshot(lv(base.get()), lv);
        if (base.get().getCapacityBytes() < record.getCapacityBytes()) { // the volume grew since its base was taken
            volumes.extend(lv, record.getCapacityBytes());
        }
        return true;
    }

    @Override
    public IncomingContent open(SnapshotRecord record) throws IOException, DeviceException {
        String lv = lv(record);
        if (volumes.find(lv).isEmpty()) {
            throw pool.missing(LvmPool.SNAPSHOT_PREFIX + record.getName());
        }
        LogicalVolume volume = volumes.activate(lv);
        try {
            long capacity = record.getCapacityBytes();
            return new IncomingContent(volume.device(), capacity, false, !record.getBaseSnapshot().isEmpty(),
                    (file, offset, length) -> zero(file, lv, offset, length), device -> ImageContent.digestDevice(device, capacity),
                    () -> volumes.deactivate(lv));
        } catch (IOException | RuntimeException e) {
            volumes.deactivate(lv);
            throw e;
        }
    }

    /** Discarded (unmapped, where it covers the thin pool's chunks whole), then zeros written where data is left. */
    private void zero(FileChannel device, String lv, long offset, long length) throws IOException {
        try {
            volumes.discard(lv, offset, length);
        } catch (DeviceException e) {
            throw new IOException(e.getMessage(), e);
        }
        ImageContent.zeroData(device, offset, offset + length);
    }

    @Override
    public void remove(SnapshotRecord record) throws DeviceException {
        String lv = lv(record);
        Optional<LogicalVolume> found = volumes.find(lv);
        if (found.isPresent()) {
            if (found.get().active()) {
                volumes.deactivate(lv);
            }
            volumes.remove(lv);
        }
    }

    private String lv(SnapshotRecord record) {
        return pool.lv(LvmPool.SNAPSHOT_PREFIX + record.getName());
    }
}
