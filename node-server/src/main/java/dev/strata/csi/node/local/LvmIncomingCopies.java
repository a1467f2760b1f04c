package dev.strata.csi.node.local;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.Source;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.LogicalVolumes.LogicalVolume;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * The LVM pool's copies from other nodes: a logical volume made inactive, thin or linear as the
 * allocation asks (a copy from another node is written, not a thin snapshot, so it can be linear),
 * its capacity reserved as a create's; activated for each stream and deactivated after it, as a
 * RECEIVING volume is never attached. A fresh thin volume in a thin pool that zeroes new chunks
 * (LVM's default) reads as zeros where nothing is written; a linear volume holds whatever its
 * extents held before, and a thin pool without zeroing gives a new chunk's old data to the blocks
 * of it not written, so there the stream's left-out zeros are written ({@link IncomingContent}),
 * as the record says from its start on.
 */
final class LvmIncomingCopies implements IncomingCopies {

    private final LvmPool pool;
    private final ReceivingRecords receiving;
    private final LogicalVolumes volumes;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    LvmIncomingCopies(LvmPool pool, ReceivingRecords receiving, LogicalVolumes volumes, Crashes<CrashPoint> crashes, Log log) {
        this.pool = pool;
        this.receiving = receiving;
        this.volumes = volumes;
        this.crashes = crashes;
        this.log = log;
    }

    @Override
    public ImageRecord receive(String name, long capacityBytes, Allocation allocation, ContentSource source, boolean encrypted,
            double overcommitRatio) throws IOException, DeviceException, MountException {
        pool.checkName(name);
        LvmPool.requirePlain(name, encrypted);
        Source from = ImagePool.recorded(source);
        ImageRecord.Allocation recorded = ImagePool.recorded(allocation);
        Optional<ImageRecord> ready = receiving.existing(name, capacityBytes, recorded, from, false);
        if (ready.isPresent()) {
            return ready.get();
        }
        Optional<ImageRecord> existing = pool.records().read(name);
        if (existing.isPresent()) {
            pool.finishDelete(existing.get()); // CREATING holds no data; DELETING is finished
        } else {
            pool.requireNoStrayVolume(name);
        }
        ImageRecord record = ImageRecord.newBuilder()
                .setName(name)
                .setCapacityBytes(capacityBytes)
                .setAllocation(recorded)
                .setThinOvercommitRatio(allocation == Allocation.FULL || overcommitRatio <= 1 ? 0 : overcommitRatio)
                .setState(ImageRecord.State.CREATING)
                .setSource(from)
                .setReceiveZeroesGaps(zeroesGaps(allocation))
                .build();
        pool.reserve(record);
        crashes.reach(CrashPoint.CREATE_RECORDED);
        create(record);
        crashes.reach(CrashPoint.CREATE_ALLOCATED);
        record = receiving.progressed(record.toBuilder());
        log.info("logical volume created to receive content", "volume", name, "group", volumes.volumeGroup(),
                "kind", allocation == Allocation.FULL ? "linear" : "thin", "bytes", capacityBytes,
                "zeroes_gaps", record.getReceiveZeroesGaps());
        return record;
    }

    /**
     * Whether the new volume must have the stream's gaps written as zeros: linear, or thin in a pool
     * that does not zero new chunks. Without a thin pool the capacity check refuses the volume anyway.
     */
    private boolean zeroesGaps(Allocation allocation) throws DeviceException {
        return allocation == Allocation.FULL || (volumes.thinPoolSpace().isPresent() && !volumes.thinPoolZeroes());
    }

    private void create(ImageRecord record) throws DeviceException {
        if (record.getAllocation() == ImageRecord.Allocation.FULL) {
            volumes.createLinear(record.getName(), record.getCapacityBytes());
        } else {
            volumes.createThin(record.getName(), record.getCapacityBytes());
        }
    }

    @Override
    public ImageRecord receiving(String name) throws IOException {
        return receiving.receiving(name);
    }

    /**
     * Where gaps are zeroed, the new stream writes every byte anyway; elsewhere the thin volume is
     * made again, empty, before the record names the new content (a crash in between leaves the old
     * tag, or no volume, which {@link #open} makes again while nothing is recorded as received).
     */
    @Override
    public ImageRecord restart(String name, String tag) throws IOException, DeviceException {
        ImageRecord record = receiving.receiving(name);
        if (!record.getReceiveZeroesGaps()) {
            Optional<LogicalVolume> volume = volumes.find(name);
            if (volume.isPresent()) {
                if (volume.get().active()) {
                    volumes.deactivate(name);
                }
                volumes.remove(name);
            }
            create(record);
        }
        return receiving.restarted(name, tag);
    }

    @Override
    public void receivedUpTo(String name, long receivedBytes) throws IOException {
        receiving.receivedUpTo(name, receivedBytes);
    }

    /** Activates the volume for the stream; closing deactivates it. */
    @Override
    public IncomingContent open(String name) throws IOException, DeviceException {
        ImageRecord record = receiving.receiving(name);
        if (volumes.find(name).isEmpty()) {
            if (record.getReceivedBytes() > 0) {
                throw pool.missing(name);
            }
            create(record); // a start over cut short between the removal and the new volume
        }
        LogicalVolume volume = volumes.activate(name);
        try {
            long capacity = record.getCapacityBytes();
            return new IncomingContent(volume.device(), capacity, record.getReceiveZeroesGaps(),
                    device -> ImageContent.digestDevice(device, capacity), () -> volumes.deactivate(name));
        } catch (IOException | RuntimeException e) {
            volumes.deactivate(name);
            throw e;
        }
    }

    @Override
    public Image finish(String name, long sourceBytes, String filesystem, boolean usedAsBlock, boolean encrypted) throws IOException {
        return LvmPool.image(receiving.ready(name, sourceBytes, filesystem, usedAsBlock, encrypted), Optional.empty()); // deactivated after each stream
    }

    @Override
    public List<String> names() throws IOException {
        return receiving.names();
    }

    @Override
    public boolean removeIfAbandoned(String name, Duration expiry) throws IOException, DeviceException, MountException {
        return receiving.removeIfAbandoned(name, expiry, pool::delete);
    }

    /** At start: a volume a stream had activated when the node stopped is deactivated; the retried copy resumes it. */
    void reconcile(ImageRecord record) throws DeviceException, MountException {
        pool.deactivateUnused(record.getName());
        log.info("logical volume partly received from another node; the retried create resumes it",
                "volume", record.getName(), "received_bytes", record.getReceivedBytes());
    }
}
