package dev.strata.csi.node.local.pool;

import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.lvm.LogicalVolumes.LogicalVolume;
import dev.strata.csi.node.local.lvm.LogicalVolumes;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;

/**
 * The LVM pool's content for other nodes: a detached volume's or a thin snapshot's device, read
 * whole ({@link ImageContent#readDevice}). Neither is active when not in use, so it is activated
 * for the read and deactivated after it, unless it was active before.
 */
final class LvmOutgoingCopies implements OutgoingCopies {

    private final LvmPool pool;
    private final PoolSnapshotStore snapshots;
    private final LogicalVolumes volumes;

    LvmOutgoingCopies(LvmPool pool, PoolSnapshotStore snapshots, LogicalVolumes volumes) {
        this.pool = pool;
        this.snapshots = snapshots;
        this.volumes = volumes;
    }

    /**
     * An active volume is attached (or about to be): FAILED_PRECONDITION, as in the image pool.
     * A detached logical volume changes only once attached again, which waits for the read; its
     * tag does not tell such a change between two streams of one copy, whose digest then differs
     * (DATA_LOSS: the copy starts over).
     */
    @Override
    public OutgoingContent volume(String name) throws IOException, DeviceException {
        ImageRecord record = pool.content(name);
        LogicalVolume volume = volumes.find(pool.lv(name)).orElseThrow(() -> pool.missing(name));
        if (volume.active()) {
            throw CsiException.failedPrecondition("volume " + name + " is attached; a copy of a volume in use is read from a snapshot of it");
        }
        return read("lv/" + name + "/" + record.getCapacityBytes(), pool.lv(name), false, record.getCapacityBytes(), record.getFilesystem(),
                record.getUsedAsBlock());
    }

    @Override
    public OutgoingContent snapshot(String name) throws IOException, DeviceException {
        SnapshotRecord record = snapshots.ready(name);
        String volume = pool.lv(LvmPool.SNAPSHOT_PREFIX + name);
        boolean active = volumes.find(volume).orElseThrow(() -> pool.missing(LvmPool.SNAPSHOT_PREFIX + name)).active();
        return read(PoolSnapshots.contentTag(record), volume, active, record.getCapacityBytes(), record.getFilesystem(),
                record.getUsedAsBlock());
    }

    private OutgoingContent read(String tag, String volume, boolean active, long sizeBytes, String filesystem, boolean usedAsBlock)
            throws DeviceException {
        var device = volumes.activate(volume).device();
        return new OutgoingContent(tag, sizeBytes, filesystem, usedAsBlock, false,
                (from, chunks) -> ImageContent.readDevice(device, sizeBytes, from, chunks), () -> {
                    if (!active) {
                        volumes.deactivate(volume);
                    }
                });
    }
}
