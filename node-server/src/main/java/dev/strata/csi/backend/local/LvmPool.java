package dev.strata.csi.backend.local;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.backend.local.LogicalVolumes.LogicalVolume;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A node's LVM pool: each volume a logical volume of the volume group the node's admin named,
 * thin in the group's thin pool ({@code allocation: sparse}, the default) or linear
 * ({@code allocation: full}: every extent taken at creation), each with its record (the same
 * records, in the same format, as {@link ImagePool}'s, in a directory of their own). The record
 * holds the desired state (exists, attached); LVM holds the actual state (the logical volume,
 * active or not). Every operation writes its intent to the record before it acts, so a crash
 * between any two steps leaves a state that the retried call, or {@link #reconcile()} at the next
 * start, completes; the crash points are the image pool's, named after the same steps. Attaching
 * activates the volume on this node, which makes its device-mapper device; detaching deactivates
 * it. Callers serialise operations per volume name.
 *
 * <p>Capacity: a thin volume is admitted while the thin volumes' sizes together fit in the thin
 * pool and the pool's data has room (no overcommit), and none while the pool's metadata is nearly
 * full; a linear volume while the group has the free extents.
 */
public final class LvmPool {

    /** A thin pool whose metadata is this full takes no new volume: a thin pool out of metadata fails every write. */
    static final double METADATA_FULL_PERCENT = 95;
    /** The kernel's limit on a device-mapper name ({@code <group>-<volume>}, dashes doubled). */
    private static final int DM_NAME_MAX = 127;

    private final RecordStore records;
    private final LogicalVolumes volumes;
    private final Mounter mounts;
    private final Crashes<CrashPoint> crashes;
    private final Log log;
    /** Held from the capacity check until the record that reserves the capacity is written. */
    private final Object capacityLock = new Object();

    public LvmPool(Path recordsDir, LogicalVolumes volumes, Mounter mounts, Crashes<CrashPoint> crashes, Log log) {
        this.records = new RecordStore(recordsDir, log);
        this.volumes = volumes;
        this.mounts = mounts;
        this.crashes = crashes;
        this.log = log;
    }

    /** Creates the logical volume, or returns it when it exists with the same size and allocation. */
    public Image create(String name, long capacityBytes, Allocation allocation) throws IOException, DeviceException, MountException {
        checkName(name);
        Optional<ImageRecord> existing = records.read(name);
        if (existing.isPresent()) {
            ImageRecord record = existing.get();
            switch (record.getState()) {
                case READY -> {
                    if (record.getCapacityBytes() != capacityBytes || allocation(record) != allocation) {
                        throw CsiException.alreadyExists("volume " + name + " exists with " + record.getCapacityBytes() + " bytes, "
                                + allocation(record) + "; asked for " + capacityBytes + " bytes, " + allocation);
                    }
                    return image(record, volumes.find(name));
                }
                case RECEIVING -> throw CsiException.failedPrecondition("volume " + name + " has a record of a copy from another node,"
                        + " which the LVM pool does not receive; left as it is");
                default -> finishDelete(record); // DELETING, or an interrupted create: holds no data, removed and made again
            }
        } else if (volumes.find(name).isPresent()) {
            throw CsiException.failedPrecondition("volume group " + volumes.volumeGroup() + " holds a logical volume " + name
                    + " tagged as the driver's, without a record; the driver does not touch data it cannot account for");
        }
        ImageRecord record = ImageRecord.newBuilder()
                .setName(name)
                .setCapacityBytes(capacityBytes)
                .setAllocation(allocation == Allocation.FULL ? ImageRecord.Allocation.FULL : ImageRecord.Allocation.SPARSE)
                .setState(ImageRecord.State.CREATING)
                .build();
        synchronized (capacityLock) {
            long available = available(allocation);
            if (capacityBytes > available) {
                throw CsiException.resourceExhausted("volume " + name + " needs " + capacityBytes + " bytes; volume group "
                        + volumes.volumeGroup() + " has " + available + " for " + kind(allocation) + " volumes");
            }
            records.write(record); // from here on the record reserves its capacity
        }
        crashes.reach(CrashPoint.CREATE_RECORDED);
        if (allocation == Allocation.FULL) {
            volumes.createLinear(name, capacityBytes);
        } else {
            volumes.createThin(name, capacityBytes);
        }
        crashes.reach(CrashPoint.CREATE_ALLOCATED);
        record = record.toBuilder().setState(ImageRecord.State.READY).build();
        records.write(record);
        log.info("logical volume created", "volume", name, "group", volumes.volumeGroup(), "kind", kind(allocation),
                "bytes", capacityBytes);
        return image(record, Optional.empty());
    }

    /** Deletes the logical volume and its record; succeeds when already gone. FAILED_PRECONDITION while mounted. */
    public void delete(String name) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty()) {
            return;
        }
        requireUnused(name, volumes.find(name));
        ImageRecord deleting = record.get().toBuilder().setState(ImageRecord.State.DELETING).setAttached(false).build();
        records.write(deleting);
        crashes.reach(CrashPoint.DELETE_RECORDED);
        finishDelete(deleting);
        log.info("logical volume deleted", "volume", name, "group", volumes.volumeGroup());
    }

    /** Activates the logical volume for {@code nodeId}, or returns it active as it is: its device path names the device. */
    public Image attach(String name, String nodeId) throws IOException, DeviceException {
        ImageRecord record = records.ready(name);
        if (!record.getAttached() || !record.getPublishedNodeIdsList().contains(nodeId)) {
            ImageRecord.Builder wanted = record.toBuilder().setAttached(true);
            if (!record.getPublishedNodeIdsList().contains(nodeId)) {
                wanted.addPublishedNodeIds(nodeId);
            }
            record = wanted.build();
            records.write(record);
        }
        crashes.reach(CrashPoint.ATTACH_RECORDED);
        LogicalVolume volume = volumes.find(name).orElseThrow(() -> missing(name));
        if (!volume.active()) {
            volume = volumes.activate(name);
            log.info("logical volume activated", "volume", name, "device", volume.device());
            crashes.reach(CrashPoint.ATTACH_ATTACHED);
        }
        return image(record, Optional.of(volume));
    }

    /** Deactivates the logical volume; succeeds when not active. FAILED_PRECONDITION while mounted. */
    public void detach(String name, String nodeId) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty()) {
            return;
        }
        Optional<LogicalVolume> volume = volumes.find(name);
        requireUnused(name, volume);
        ImageRecord current = record.get();
        List<String> published = new ArrayList<>(current.getPublishedNodeIdsList());
        published.remove(nodeId);
        if (current.getAttached() || published.size() != current.getPublishedNodeIdsCount()) {
            records.write(current.toBuilder().setAttached(false).clearPublishedNodeIds().addAllPublishedNodeIds(published).build());
        }
        crashes.reach(CrashPoint.DETACH_RECORDED);
        if (volume.isPresent() && volume.get().active()) {
            volumes.deactivate(name);
            log.info("logical volume deactivated", "volume", name, "device", volume.get().device());
            crashes.reach(CrashPoint.DETACH_DETACHED);
        }
    }

    public Optional<Image> get(String name) throws IOException, DeviceException {
        Optional<ImageRecord> record = records.read(name).filter(r -> r.getState() == ImageRecord.State.READY);
        if (record.isEmpty()) {
            return Optional.empty();
        }
        return Optional.of(image(record.get(), volumes.find(name)));
    }

    public List<Image> list() throws IOException, DeviceException {
        List<LogicalVolume> present = volumes.list(); // one lvs for every volume
        List<Image> images = new ArrayList<>();
        for (ImageRecord record : records.all()) {
            if (record.getState() == ImageRecord.State.READY) {
                images.add(image(record, present.stream().filter(v -> v.name().equals(record.getName())).findFirst()));
            }
        }
        return images;
    }

    /** What a new thin volume (the default kind) can get, against the thin pool's size. */
    public PoolStatus status() throws IOException, DeviceException {
        long total = volumes.thinPoolSpace().map(LogicalVolumes.ThinPoolSpace::sizeBytes).orElse(0L);
        int count = (int) records.all().stream().filter(r -> r.getState() == ImageRecord.State.READY).count();
        return PoolStatus.newBuilder().setTotalBytes(total).setAvailableBytes(available(Allocation.SPARSE)).setImageCount(count).build();
    }

    /**
     * Brings LVM in line with the records after a crash or reboot: volumes that should be active
     * are activated, volumes nothing wants active are deactivated when unused, interrupted creates
     * and deletes are finished. A logical volume tagged as the driver's without a record is only
     * reported: it may hold someone's data.
     */
    public void reconcile() throws IOException, DeviceException {
        int temporaries = records.removeTemporaries();
        if (temporaries > 0) {
            log.info("removed temporary record files of interrupted writes", "count", temporaries);
        }
        List<ImageRecord> all = records.all();
        for (ImageRecord record : all) {
            try {
                reconcile(record);
            } catch (Exception e) {
                // One volume in trouble must not keep the node from serving every other volume.
                log.error("cannot reconcile volume; left as it is", "volume", record.getName(), "error", e.getMessage());
            }
        }
        for (LogicalVolume volume : volumes.list()) {
            if (all.stream().noneMatch(record -> record.getName().equals(volume.name()))) {
                log.warn("logical volume tagged as the driver's has no record; left as it is", "volume", volume.name(),
                        "group", volumes.volumeGroup());
            }
        }
    }

    private void reconcile(ImageRecord record) throws IOException, DeviceException, MountException {
        switch (record.getState()) {
            case READY -> {
                Optional<LogicalVolume> volume = volumes.find(record.getName());
                if (volume.isEmpty()) {
                    log.error("logical volume of a volume is missing from the group", "volume", record.getName(),
                            "group", volumes.volumeGroup());
                } else if (record.getAttached() && !volume.get().active()) {
                    volumes.activate(record.getName());
                    log.info("activated logical volume again", "volume", record.getName());
                } else if (!record.getAttached() && volume.get().active() && inUse(volume.get()).isEmpty()) {
                    volumes.deactivate(record.getName());
                    log.info("deactivated logical volume nothing wants active", "volume", record.getName());
                }
            }
            case DELETING -> {
                finishDelete(record);
                log.info("finished interrupted delete", "volume", record.getName());
            }
            case RECEIVING -> log.warn("record of a copy from another node, which the LVM pool does not receive; left as it is",
                    "volume", record.getName());
            default -> {
                finishDelete(record);
                log.info("removed interrupted create", "volume", record.getName());
            }
        }
    }

    /** Removes the logical volume (deactivated first) and then its record. */
    private void finishDelete(ImageRecord record) throws IOException, DeviceException, MountException {
        Optional<LogicalVolume> volume = volumes.find(record.getName());
        if (volume.isPresent()) {
            requireUnused(record.getName(), volume);
            if (volume.get().active()) {
                volumes.deactivate(record.getName());
                crashes.reach(CrashPoint.DELETE_DETACHED);
            }
            volumes.remove(record.getName());
            crashes.reach(CrashPoint.DELETE_UNLINKED);
        }
        records.delete(record.getName());
    }

    /** What a new volume of that kind may take: thin within the thin pool without overcommit, linear within the free extents. */
    private long available(Allocation allocation) throws IOException, DeviceException {
        if (allocation == Allocation.FULL) {
            return volumes.groupSpace().freeBytes();
        }
        Optional<LogicalVolumes.ThinPoolSpace> pool = volumes.thinPoolSpace();
        if (pool.isEmpty() || pool.get().metadataPercent() >= METADATA_FULL_PERCENT) {
            return 0;
        }
        long reserved = records.all().stream()
                .filter(record -> record.getAllocation() != ImageRecord.Allocation.FULL)
                .mapToLong(ImageRecord::getCapacityBytes).sum();
        long unwritten = (long) (pool.get().sizeBytes() * (100 - pool.get().dataPercent()) / 100);
        return Math.max(0, Math.min(pool.get().sizeBytes() - reserved, unwritten));
    }

    /** FAILED_PRECONDITION while a mount uses the volume's device. */
    private void requireUnused(String name, Optional<LogicalVolume> volume) throws MountException {
        if (volume.isEmpty() || !volume.get().active()) {
            return;
        }
        List<MountPoint> users = inUse(volume.get());
        if (!users.isEmpty()) {
            throw CsiException.failedPrecondition("volume " + name + " is in use: " + volume.get().device()
                    + " is mounted at " + users.getFirst().mountPoint());
        }
    }

    /** The mounts of the device: by its path, its device number, or (a block bind) its node in devtmpfs. */
    private List<MountPoint> inUse(LogicalVolume volume) throws MountException {
        String kernelName = volume.number().map(number -> "/dm-" + number.minor()).orElse("");
        return mounts.table().all().stream()
                .filter(mount -> mount.source().equals(volume.device().toString())
                        || volume.number().map(mount.device()::equals).orElse(false)
                        || (mount.fsType().equals("devtmpfs") && !kernelName.isEmpty() && mount.root().equals(kernelName)))
                .toList();
    }

    private void checkName(String name) {
        VolumeId.checkName(name);
        int dmName = volumes.volumeGroup().replace("-", "--").length() + 1 + name.replace("-", "--").length();
        if (dmName > DM_NAME_MAX) {
            throw CsiException.invalidArgument("volume name '" + name + "' is too long for a logical volume of group "
                    + volumes.volumeGroup() + ": its device-mapper name would have " + dmName + " characters, at most "
                    + DM_NAME_MAX);
        }
    }

    private CsiException missing(String name) {
        return CsiException.internal("the logical volume of volume " + name + " is missing from group " + volumes.volumeGroup());
    }

    private static String kind(Allocation allocation) {
        return allocation == Allocation.FULL ? "linear" : "thin";
    }

    private static Allocation allocation(ImageRecord record) {
        return record.getAllocation() == ImageRecord.Allocation.FULL ? Allocation.FULL : Allocation.SPARSE;
    }

    private static Image image(ImageRecord record, Optional<LogicalVolume> volume) {
        return Image.newBuilder()
                .setName(record.getName())
                .setCapacityBytes(record.getCapacityBytes())
                .setAllocation(allocation(record))
                .setDevicePath(volume.filter(LogicalVolume::active).map(v -> v.device().toString()).orElse(""))
                .addAllPublishedNodeIds(record.getPublishedNodeIdsList())
                .build();
    }
}
