package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.lvm.LogicalVolumes.LogicalVolume;
import dev.strata.csi.node.local.lvm.LogicalVolumes;
import java.io.IOException;
import java.util.Optional;

/**
 * The LVM pool's storage for copies from other nodes: a logical volume made inactive, thin or
 * linear as the allocation asks (a copy from another node is written, not a thin snapshot, so it
 * can be linear), activated for each stream and deactivated after it, as a RECEIVING volume is
 * never attached. A new thin volume in a thin pool that zeroes new chunks (LVM's default) reads as
 * zeros where nothing is written; a linear volume holds whatever its extents held before, and a
 * thin pool without zeroing gives a new chunk's old data to the blocks of it not written, so there
 * the stream's left-out zeros are written ({@link IncomingContent}), as the record says from its
 * start on.
 */
final class LvmReceiving implements ReceivingStorage {

    private final LvmPool pool;
    private final LogicalVolumes volumes;

    LvmReceiving(LvmPool pool, LogicalVolumes volumes) {
        this.pool = pool;
        this.volumes = volumes;
    }

    @Override
    public PoolKind kind() {
        return PoolKind.POOL_LVM;
    }

    /**
     * Whether the new volume must have the stream's gaps written as zeros: linear, or thin in a pool
     * that does not zero new chunks. Without a thin pool the capacity check refuses the volume anyway.
     */
    @Override
    public ImageRecord plan(ImageRecord.Builder record, double overcommitRatio) throws DeviceException {
        pool.checkName(record.getName());
        LvmPool.requirePlain(record.getName(), record.getEncrypted());
        boolean linear = record.getAllocation() == ImageRecord.Allocation.FULL;
        return record
                .setThinOvercommitRatio(linear || overcommitRatio <= 1 ? 0 : overcommitRatio)
                .setReceiveZeroesGaps(linear || (volumes.thinPoolSpace().isPresent() && !volumes.thinPoolZeroes()))
                .build();
    }

    @Override
    public void clear(String name, Optional<ImageRecord> existing) throws IOException, DeviceException, MountException {
        if (existing.isPresent()) {
            pool.finishDelete(existing.get());
        } else {
            pool.requireNoStrayVolume(name);
        }
    }

    @Override
    public void reserve(ImageRecord record) throws IOException, DeviceException {
        pool.reserve(record);
    }

    @Override
    public void create(ImageRecord record) throws DeviceException {
        if (record.getAllocation() == ImageRecord.Allocation.FULL) {
            volumes.createLinear(pool.lv(record.getName()), record.getCapacityBytes());
        } else {
            volumes.createThin(pool.lv(record.getName()), record.getCapacityBytes());
        }
    }

    /**
     * Where gaps are zeroed, the new stream writes every byte anyway; elsewhere the thin volume is
     * made again, empty (a crash between its removal and the new one: {@link #open} makes it).
     */
    @Override
    public void empty(ImageRecord record) throws DeviceException {
        if (record.getReceiveZeroesGaps()) {
            return;
        }
        String lv = pool.lv(record.getName());
        Optional<LogicalVolume> volume = volumes.find(lv);
        if (volume.isPresent()) {
            if (volume.get().active()) {
                volumes.deactivate(lv);
            }
            volumes.remove(lv);
        }
        create(record);
    }

    /**
     * Activates the volume for the stream; closing deactivates it. A thin pool whose zeroing was
     * turned off since the volume was made gives old data from now on: the gaps are written as
     * zeros from here, recorded first so that every later stream does so too (chunks taken before
     * were zeroed).
     */
    @Override
    public IncomingContent open(ImageRecord received) throws IOException, DeviceException {
        ImageRecord record = received;
        String name = record.getName();
        if (!record.getReceiveZeroesGaps() && !volumes.thinPoolZeroes()) {
            record = record.toBuilder().setReceiveZeroesGaps(true).build();
            pool.records().write(record);
        }
        String lv = pool.lv(name);
        if (volumes.find(lv).isEmpty()) {
            if (record.getReceivedBytes() > 0) {
                throw pool.missing(name);
            }
            create(record); // a start over cut short between the removal and the new volume
        }
        LogicalVolume volume = volumes.activate(lv);
        try {
            long capacity = record.getCapacityBytes();
            return new IncomingContent(volume.device(), capacity, record.getReceiveZeroesGaps(),
                    device -> ImageContent.digestDevice(device, capacity), () -> volumes.deactivate(lv));
        } catch (IOException | RuntimeException e) {
            volumes.deactivate(lv);
            throw e;
        }
    }

    @Override
    public Volume image(ImageRecord record) {
        return LvmPool.image(record, Optional.empty());
    }

    @Override
    public void delete(String name) throws IOException, DeviceException, MountException {
        pool.delete(name);
    }
}
