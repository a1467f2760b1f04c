package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.backend.local.records.Source;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.node.local.BlockDevice;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.ChangedBlocks;
import dev.strata.csi.node.local.lvm.ThinMappings;
import dev.strata.csi.node.local.lvm.LogicalVolumes.LogicalVolume;
import dev.strata.csi.node.local.lvm.LogicalVolumes;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Clock;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;

/**
 * A node's LVM pool: each volume a logical volume of the volume group the node's admin named,
 * thin in the group's thin pool ({@code lvType: thin}, the default) or linear
 * ({@code lvType: linear}: every extent taken at creation), each with its record (the same
 * records, in the same format, as {@link ImagePool}'s, in a directory of their own). The record
 * holds the desired state (exists, attached); LVM holds the actual state (the logical volume,
 * active or not). Every operation writes its intent to the record before it acts, so a crash
 * between any two steps leaves a state that the retried call, or {@link #reconcile()} at the next
 * start, completes; the crash points are the image pool's, named after the same steps. Attaching
 * activates the volume on this node, which makes its device-mapper device; detaching deactivates
 * it. Callers serialise operations per volume name.
 *
 * <p>Snapshots are thin snapshots of thin volumes ({@link LogicalVolumes#snapshot}), with records
 * of their own ({@link PoolSnapshotStore}, as the image pool's): instant, independent of the volume's
 * later writes, kept after it is deleted. A restore is a thin snapshot of the snapshot, a clone one
 * of the source volume; either is then extended to the size asked for, and keeps its source's
 * filesystem in its record (never formatted; grown at its first stage when larger).
 *
 * <p>Capacity: a thin volume, snapshot, restore or clone is admitted while the sizes of them all
 * together fit in the thin pool and the pool's data has room (no overcommit: a snapshot shares its
 * blocks until its source is overwritten, and then needs them), and none while the pool's
 * metadata is nearly full; a linear volume while the group has the free extents.
 */
public final class LvmPool implements VolumePool {

    /**
     * A thin pool whose metadata, or data, is this full takes no new volume, overcommit or not: a
     * thin pool out of either fails every write.
     */
    static final double FULL_PERCENT = 95;
    /** LVM refuses volume names that begin with "snapshot", as the snapshots' CSI names do: their volumes get this prefix. */
    static final String SNAPSHOT_PREFIX = "snap.";
    /** The kernel's limit on a device-mapper name ({@code <group>-<volume>}, dashes doubled). */
    private static final int DM_NAME_MAX = 127;
    /** The logical volumes of names LVM or device-mapper would not take begin with this ({@link #lv}). */
    static final String HASHED_PREFIX = "lv.";
    /**
     * Why a thin pool that does not zero new chunks takes no new thin volume: a chunk partly
     * written would show the rest of a deleted volume's data. Zeroing it ourselves would write,
     * and so allocate, every chunk of a thin volume: no longer thin.
     */
    static final String THIN_POOL_WITHOUT_ZEROING = "the thin pool does not zero new chunks (lvs -o zero), so a new thin volume"
            + " would show deleted volumes' data; the node's admin turns zeroing on with lvchange --zero y <group>/<thin pool>";
    /** Parts of a name LVM keeps for its own hidden volumes. */
    private static final List<String> RESERVED_PARTS = List.of("_cdata", "_cmeta", "_corig", "_cpool", "_cvol", "_imeta", "_iorig",
            "_mimage", "_mlog", "_pmspare", "_rimage", "_rmeta", "_tdata", "_tmeta", "_vdata", "_vorigin", "_wcorig");

    private final RecordStore records;
    private final PoolSnapshotStore snapshots;
    private final LogicalVolumes volumes;
    private final Mounter mounts;
    private final Crashes<CrashPoint> crashes;
    private final Log log;
    /** When a snapshot is taken, as its record keeps it. */
    private final Clock clock;
    /** Held from the capacity check until the record that reserves the capacity is written. */
    private final Object capacityLock = new Object();
    private final VolumeSnapshots snapshotView = new Snapshots();
    private final IncomingCopies incoming;
    private final LvmOutgoingCopies outgoing;
    private final SnapshotCopies snapshotCopies;
    private final ThinChangedBlocks changedBlocks;

    public LvmPool(Path recordsDir, LogicalVolumes volumes, ThinMappings mappings, Mounter mounts, Crashes<CrashPoint> crashes, Clock clock,
            Log log) {
        this.records = new RecordStore(recordsDir, log);
        this.snapshots = new PoolSnapshotStore(recordsDir, log);
        this.clock = clock;
        this.volumes = volumes;
        this.mounts = mounts;
        this.crashes = crashes;
        this.log = log;
        this.incoming = new IncomingCopies(records, new LvmReceiving(this, volumes), clock, crashes, log);
        this.outgoing = new LvmOutgoingCopies(this, snapshots, volumes);
        this.snapshotCopies = new SnapshotCopies(snapshots, new LvmCopyStorage(this, volumes), clock, crashes, log);
        this.changedBlocks = new ThinChangedBlocks(this, volumes, mappings);
    }

    /** The copies this pool receives from other nodes: into thin or linear logical volumes. */
    @Override
    public IncomingCopies incoming() {
        return incoming;
    }

    /** The copies other nodes receive of this pool's volumes and thin snapshots, read from their devices. */
    @Override
    public OutgoingCopies outgoing() {
        return outgoing;
    }

    /** The thin snapshots' mappings in the thin pool's metadata. */
    @Override
    public ChangedBlocks changedBlocks() {
        return changedBlocks;
    }

    @Override
    public PoolKind kind() {
        return PoolKind.POOL_LVM;
    }

    /**
     * Creates the logical volume, empty or as a thin snapshot of {@code source} (a snapshot:
     * restore; another volume: clone) extended to {@code capacityBytes}, or returns it when it
     * exists with the same size, type and source. A source that is not there: NOT_FOUND;
     * one larger than the size asked for: OUT_OF_RANGE; a copy that is to be linear,
     * or of a linear volume: INVALID_ARGUMENT, as only thin volumes
     * have thin snapshots. A thin volume is admitted, and later grown, while the sizes of every
     * thin volume and snapshot stay within the thin pool's size times {@code overcommitRatio}; at
     * 1 (no overcommit) also within its unwritten data, so that each can always be filled.
     * Encrypted or not: recorded, as in the image pool; a copy's source must be the same.
     */
    @Override
    public Volume create(String name, long capacityBytes, Allocation allocation, LvType lvType, Optional<ContentSource> source,
            boolean encrypted, double overcommitRatio) throws IOException, DeviceException, MountException {
        checkName(name);
        Optional<Source> wantedSource = source.map(ImagePool::recorded);
        Optional<ImageRecord> existing = records.read(name);
        if (existing.isPresent()) {
            ImageRecord record = existing.get();
            switch (record.getState()) {
                case READY -> {
                    requireSame(record, capacityBytes, lvType, wantedSource);
                    ImagePool.requireSameEncryption(record, encrypted);
                    return image(record, volumes.find(lv(name)));
                }
                case RECEIVING -> throw CsiException.alreadyExists("volume " + name
                        + " is being made with the content of another node's volume or snapshot");
                default -> finishDelete(record); // DELETING, or an interrupted create: holds no data, removed and made again
            }
        } else {
            requireNoStrayVolume(name);
        }
        ImageRecord.Builder wanted = ImageRecord.newBuilder()
                .setName(name)
                .setCapacityBytes(capacityBytes)
                .setLvType(recorded(lvType))
                .setThinOvercommitRatio(lvType == LvType.LINEAR || overcommitRatio <= 1 ? 0 : overcommitRatio)
                .setEncrypted(encrypted)
                .setState(ImageRecord.State.CREATING);
        Optional<String> origin = Optional.empty();
        if (wantedSource.isPresent()) {
            if (lvType == LvType.LINEAR) {
                throw CsiException.invalidArgument("volume " + name + ": a restore or clone in an LVM pool is a thin snapshot;"
                        + " it cannot be linear (lvType: linear)");
            }
            Content content = content(wantedSource.get());
            ImagePool.requireSourceEncryption(name, encrypted, wantedSource, content.encrypted());
            if (content.capacityBytes() > capacityBytes) {
                throw CsiException.outOfRange("volume " + name + " of " + capacityBytes + " bytes cannot hold "
                        + ImagePool.describe(wantedSource) + " of " + content.capacityBytes() + " bytes");
            }
            origin = Optional.of(content.volume());
            wanted.setSource(wantedSource.get())
                    .setFilesystem(content.filesystem())
                    .setUsedAsBlock(content.usedAsBlock())
                    .setGrowFilesystem(!content.filesystem().isEmpty() && content.capacityBytes() < capacityBytes);
        }
        ImageRecord record = wanted.build();
        reserve(record);
        if (origin.isPresent()) {
            crashes.reach(CrashPoint.RESTORE_RECORDED);
            volumes.snapshot(lv(origin.get()), lv(name));
            crashes.reach(CrashPoint.RESTORE_COPIED);
            if (volumes.find(lv(name)).orElseThrow(() -> missing(name)).sizeBytes() < capacityBytes) {
                volumes.extend(lv(name), capacityBytes);
            }
        } else {
            crashes.reach(CrashPoint.CREATE_RECORDED);
            if (lvType == LvType.LINEAR) {
                // Zeroed before READY: a crash meanwhile leaves a CREATING record, whose volume the retry or next start removes.
                volumes.createLinear(lv(name), capacityBytes, true);
            } else {
                volumes.createThin(lv(name), capacityBytes);
            }
        }
        crashes.reach(CrashPoint.CREATE_ALLOCATED);
        record = record.toBuilder().setState(ImageRecord.State.READY).build();
        records.write(record);
        log.info("logical volume created", "volume", name, "group", volumes.volumeGroup(), "kind", kind(lvType),
                "bytes", capacityBytes, "from", ImagePool.describe(wantedSource));
        return image(record, Optional.empty());
    }

    /** FAILED_PRECONDITION when the group holds a logical volume of that name, tagged as the driver's, without a record. */
    void requireNoStrayVolume(String name) throws DeviceException {
        if (volumes.find(lv(name)).isPresent()) {
            throw CsiException.failedPrecondition("volume group " + volumes.volumeGroup() + " holds a logical volume " + name
                    + " tagged as the driver's, without a record; the driver does not touch data it cannot account for");
        }
    }

    /** Writes the new volume's first record once the pool has room for it: from then on the record reserves its capacity. */
    void reserve(ImageRecord record) throws IOException, DeviceException {
        LvType lvType = lvType(record);
        synchronized (capacityLock) {
            long available = available(lvType, record.getThinOvercommitRatio());
            if (record.getCapacityBytes() > available) {
                if (lvType == LvType.THIN && !volumes.thinPoolZeroes()) {
                    throw CsiException.failedPrecondition("volume " + record.getName() + ": " + THIN_POOL_WITHOUT_ZEROING);
                }
                throw CsiException.resourceExhausted("volume " + record.getName() + " needs " + record.getCapacityBytes()
                        + " bytes; volume group " + volumes.volumeGroup() + " has " + available + " for " + kind(lvType) + " volumes");
            }
            records.write(record);
        }
    }

    /** Deletes the logical volume and its record; succeeds when already gone. FAILED_PRECONDITION while mounted. */
    @Override
    public void delete(String name) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty()) {
            return;
        }
        requireUnused(name, volumes.find(lv(name)));
        ImageRecord deleting = record.get().toBuilder().setState(ImageRecord.State.DELETING).setAttached(false).build();
        records.write(deleting);
        crashes.reach(CrashPoint.DELETE_RECORDED);
        finishDelete(deleting);
        log.info("logical volume deleted", "volume", name, "group", volumes.volumeGroup());
    }

    /** Activates the logical volume for {@code nodeId}, or returns it active as it is: its device path names the device. */
    @Override
    public Volume attach(String name, String nodeId) throws IOException, DeviceException {
        ImageRecord record = records.attached(records.ready(name), nodeId);
        crashes.reach(CrashPoint.ATTACH_RECORDED);
        LogicalVolume volume = volumes.find(lv(name)).orElseThrow(() -> missing(name));
        if (!volume.active()) {
            volume = volumes.activate(lv(name));
            log.info("logical volume activated", "volume", name, "device", volume.device());
            crashes.reach(CrashPoint.ATTACH_ATTACHED);
        }
        return image(record, Optional.of(volume));
    }

    /**
     * Grows the logical volume to {@code capacityBytes} with lvextend, online: an active volume's
     * device takes the new size at once, mounted or not (the node grows the filesystem after,
     * NodeExpandVolume). The new size is recorded first, so a crash before lvextend leaves a record
     * larger than its volume, which the retried call or the next start grows. Nothing is ever
     * shrunk. RESOURCE_EXHAUSTED, with the volume unchanged, when the pool cannot hold the difference.
     */
    @Override
    public Volume expand(String name, long capacityBytes) throws IOException, DeviceException {
        ImageRecord record = records.ready(name);
        if (capacityBytes > record.getCapacityBytes()) {
            LvType lvType = lvType(record);
            synchronized (capacityLock) {
                long available = available(lvType, record.getThinOvercommitRatio());
                long more = capacityBytes - record.getCapacityBytes();
                if (more > available) {
                    throw CsiException.resourceExhausted("growing volume " + name + " to " + capacityBytes + " bytes needs " + more
                            + " bytes more; volume group " + volumes.volumeGroup() + " has " + available + " for " + kind(lvType)
                            + " volumes");
                }
                ImageRecord.Builder grown = record.toBuilder().setCapacityBytes(capacityBytes);
                if (lvType == LvType.LINEAR && record.getZeroFromBytes() == 0) {
                    grown.setZeroFromBytes(volumes.find(lv(name)).orElseThrow(() -> missing(name)).sizeBytes());
                }
                record = grown.build();
                records.write(record); // from here on the record reserves the new capacity
            }
            crashes.reach(CrashPoint.EXPAND_RECORDED);
        }
        LogicalVolume volume = finishGrowth(record);
        return image(record, Optional.of(volume));
    }

    /**
     * Brings the logical volume to the recorded size, and zeroes a linear volume's new extents
     * (which held another volume's data) before the growth is done.
     */
    private LogicalVolume finishGrowth(ImageRecord record) throws IOException, DeviceException {
        LogicalVolume volume = volumes.find(lv(record.getName())).orElseThrow(() -> missing(record.getName()));
        if (volume.sizeBytes() < record.getCapacityBytes()) {
            volumes.extend(lv(record.getName()), record.getCapacityBytes());
            crashes.reach(CrashPoint.EXPAND_GROWN);
            log.info("logical volume extended", "volume", record.getName(), "bytes", record.getCapacityBytes(),
                    "active", volume.active());
            volume = volumes.find(lv(record.getName())).orElseThrow(() -> missing(record.getName()));
        }
        if (record.getZeroFromBytes() > 0) {
            volumes.zero(lv(record.getName()), record.getZeroFromBytes());
            records.write(record.toBuilder().setZeroFromBytes(0).build());
            log.info("new extents of a linear volume zeroed", "volume", record.getName(), "from", record.getZeroFromBytes());
        }
        return volume;
    }

    /** Deactivates the logical volume; succeeds when not active. FAILED_PRECONDITION while mounted. */
    @Override
    public void detach(String name, String nodeId) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty()) {
            return;
        }
        Optional<LogicalVolume> volume = volumes.find(lv(name));
        requireUnused(name, volume);
        records.detached(record.get(), nodeId);
        crashes.reach(CrashPoint.DETACH_RECORDED);
        if (volume.isPresent() && volume.get().active()) {
            volumes.deactivate(lv(name));
            log.info("logical volume deactivated", "volume", name, "device", volume.get().device());
            crashes.reach(CrashPoint.DETACH_DETACHED);
        }
    }

    @Override
    public Optional<Volume> get(String name) throws IOException, DeviceException {
        Optional<ImageRecord> record = records.read(name).filter(r -> r.getState() == ImageRecord.State.READY);
        if (record.isEmpty()) {
            return Optional.empty();
        }
        return Optional.of(image(record.get(), volumes.find(lv(name))));
    }

    @Override
    public List<Volume> list() throws IOException, DeviceException {
        List<LogicalVolume> present = volumes.list(); // one lvs for every volume
        List<Volume> images = new ArrayList<>();
        for (ImageRecord record : records.all()) {
            if (record.getState() == ImageRecord.State.READY) {
                images.add(image(record, present.stream().filter(v -> v.name().equals(lv(record.getName()))).findFirst()));
            }
        }
        return images;
    }

    /**
     * What a new thin volume (the default kind) can get, against the thin pool's size; with
     * overcommit, and linear; and the thin pool's data and metadata.
     */
    @Override
    public PoolStatus status() throws IOException, DeviceException {
        LogicalVolumes.Space group = volumes.space(); // every renewal asks: one lvm command, not two
        Optional<LogicalVolumes.ThinPoolSpace> thin = group.thinPool();
        int count = (int) records.all().stream().filter(r -> r.getState() == ImageRecord.State.READY).count();
        PoolStatus.Builder status = PoolStatus.newBuilder()
                .setKind(PoolKind.POOL_LVM)
                .setTotalBytes(thin.map(LogicalVolumes.ThinPoolSpace::sizeBytes).orElse(0L))
                .setAvailableBytes(thinAvailable(thin, 1))
                .setThinReservedBytes(thinReserved())
                .setThinFull(thin.isEmpty() || takesNone(thin.get()))
                .setLinearAvailableBytes(group.group().freeBytes())
                .setVolumeCount(count);
        thin.ifPresent(space -> status
                .setThinDataBytes(space.sizeBytes())
                .setThinDataUsedBytes((long) (space.sizeBytes() * space.dataPercent() / 100))
                .setThinMetadataBytes(space.metadataBytes())
                .setThinMetadataUsedBytes((long) (space.metadataBytes() * space.metadataPercent() / 100)));
        return status.build();
    }

    /**
     * Brings LVM in line with the records after a crash or reboot: volumes that should be active
     * are activated, volumes nothing wants active are deactivated when unused, interrupted creates,
     * deletes and expansions are finished, interrupted snapshots and snapshot deletes removed. A logical volume tagged as the driver's without a record is only
     * reported: it may hold someone's data.
     */
    @Override
    public void reconcile() throws IOException, DeviceException {
        if (!volumes.thinPoolZeroes()) {
            log.error("the thin pool takes no new thin volume", "group", volumes.volumeGroup(), "reason", THIN_POOL_WITHOUT_ZEROING);
        }
        int temporaries = records.removeTemporaries();
        if (temporaries > 0) {
            log.info("removed temporary record files of interrupted writes", "count", temporaries);
        }
        temporaries = snapshots.removeTemporaries();
        if (temporaries > 0) {
            log.info("removed temporary snapshot record files of interrupted writes", "count", temporaries);
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
        List<String> known = new ArrayList<>(all.stream().map(record -> lv(record.getName())).toList());
        for (SnapshotRecord snapshot : snapshots.all()) {
            known.add(lv(SNAPSHOT_PREFIX + snapshot.getName()));
            try {
                if (snapshot.getState() == SnapshotRecord.State.RECEIVING) {
                    deactivateUnused(lv(SNAPSHOT_PREFIX + snapshot.getName())); // the retried copy resumes it
                    log.info("snapshot copy partly received from another node; the retried copy resumes it", "snapshot", snapshot.getName(),
                            "origin", snapshot.getOriginNode(), "received_bytes", snapshot.getReceivedBytes());
                } else if (snapshot.getState() != SnapshotRecord.State.READY || snapshot.getTemporary() || PoolSnapshotStore.uncommitted(snapshot)) {
                    finishSnapshotDelete(snapshot);
                    log.info("removed interrupted snapshot", "snapshot", snapshot.getName(), "state", snapshot.getState());
                } else {
                    deactivateUnused(lv(SNAPSHOT_PREFIX + snapshot.getName())); // activated by a copy to another node a crash cut short
                }
            } catch (Exception e) {
                log.error("cannot reconcile snapshot; left as it is", "snapshot", snapshot.getName(), "error", e.getMessage());
            }
        }
        for (LogicalVolume volume : volumes.list()) {
            if (!known.contains(volume.name())) {
                log.warn("logical volume tagged as the driver's has no record; left as it is", "volume", volume.name(),
                        "group", volumes.volumeGroup());
            }
        }
    }

    private void reconcile(ImageRecord record) throws IOException, DeviceException, MountException {
        switch (record.getState()) {
            case READY -> {
                Optional<LogicalVolume> volume = volumes.find(lv(record.getName()));
                if (volume.isEmpty()) {
                    log.error("logical volume of a volume is missing from the group", "volume", record.getName(),
                            "group", volumes.volumeGroup());
                    return;
                }
                if (volume.get().sizeBytes() < record.getCapacityBytes() || record.getZeroFromBytes() > 0) {
                    finishGrowth(record);
                    log.info("finished interrupted expansion", "volume", record.getName(), "bytes", record.getCapacityBytes());
                }
                if (record.getAttached() && !volume.get().active()) {
                    volumes.activate(lv(record.getName()));
                    log.info("activated logical volume again", "volume", record.getName());
                } else if (!record.getAttached()) {
                    deactivateUnused(lv(record.getName()));
                }
            }
            case DELETING -> {
                finishDelete(record);
                log.info("finished interrupted delete", "volume", record.getName());
            }
            case RECEIVING -> { // a volume a stream had activated when the node stopped is deactivated; the retried copy resumes it
                deactivateUnused(lv(record.getName()));
                log.info("logical volume partly received from another node; the retried create resumes it",
                        "volume", record.getName(), "received_bytes", record.getReceivedBytes());
            }
            default -> {
                finishDelete(record);
                log.info("removed interrupted create", "volume", record.getName());
            }
        }
    }

    /** Deactivates the logical volume when it is active and nothing mounts it: nothing else wants it active. */
    void deactivateUnused(String volume) throws DeviceException, MountException {
        Optional<LogicalVolume> found = volumes.find(volume);
        if (found.isPresent() && found.get().active() && inUse(found.get()).isEmpty()) {
            volumes.deactivate(volume);
            log.info("deactivated logical volume nothing wants active", "volume", volume);
        }
    }

    /** Removes the logical volume (deactivated first) and then its record. */
    void finishDelete(ImageRecord record) throws IOException, DeviceException, MountException {
        Optional<LogicalVolume> volume = volumes.find(lv(record.getName()));
        if (volume.isPresent()) {
            requireUnused(record.getName(), volume);
            if (volume.get().active()) {
                volumes.deactivate(lv(record.getName()));
                crashes.reach(CrashPoint.DELETE_DETACHED);
            }
            volumes.remove(lv(record.getName()));
            crashes.reach(CrashPoint.DELETE_UNLINKED);
        }
        records.delete(record.getName());
    }

    /** The pool's thin snapshots. */
    @Override
    public VolumeSnapshots snapshots() {
        return snapshotView;
    }

    /**
     * The thin snapshots, with the image pool's snapshot records ({@link PoolSnapshotStore}); a
     * temporary one (a copy to another node's) is not listed and is removed at the next start.
     */
    private final class Snapshots implements VolumeSnapshots {

        /**
         * Takes a thin snapshot of volume {@code sourceImage} under {@code name}, or returns the
         * snapshot when it exists of the same volume (another volume's: ALREADY_EXISTS). The record
         * comes first (CREATING), the snapshot then, READY last. The source must be a thin volume
         * (FAILED_PRECONDITION for a linear one), and the thin pool must have room for the snapshot's
         * whole size (RESOURCE_EXHAUSTED).
         */
        @Override
        public Pending prepare(String name, String sourceImage, boolean temporary, List<String> copyNodes,
            Optional<Membership> member)
                throws IOException, DeviceException, MountException {
            LocalSnapshotId.checkName(name);
            lv(SNAPSHOT_PREFIX + name);
            Optional<SnapshotRecord> existing = snapshots.read(name);
            if (existing.isPresent()) {
                SnapshotRecord record = existing.get();
                if (record.getState() == SnapshotRecord.State.READY) {
                    PoolSnapshotStore.requireSame(record, sourceImage, member.map(m -> m.group().getName()).orElse(""));
                    return PoolSnapshots.Existing.of(record);
                }
                if (record.getState() == SnapshotRecord.State.RECEIVING) {
                    throw SnapshotCopies.beingReceived(record);
                }
                finishSnapshotDelete(record); // CREATING or DELETING: taken again from the start
            }
            ImageRecord source = records.ready(sourceImage);
            if (source.getLvType() == ImageRecord.LvType.LINEAR) {
                throw CsiException.failedPrecondition("volume " + sourceImage + " is a linear logical volume;"
                        + " only thin volumes have snapshots in an LVM pool");
            }
            SnapshotRecord.Builder builder = SnapshotRecord.newBuilder();
            member.ifPresent(m -> builder.setGroup(m.group()));
            SnapshotRecord record = builder
                    .setName(name)
                    .setSourceVolume(sourceImage)
                    .setCapacityBytes(source.getCapacityBytes())
                    .setFilesystem(source.getFilesystem())
                    .setUsedAsBlock(source.getUsedAsBlock())
                    .setEncrypted(source.getEncrypted())
                    .setTemporary(temporary)
                    .addAllCopyNodes(copyNodes)
                    .setCreationTime(member.map(Membership::cut).orElseGet(() -> ImagePool.timestamp(clock.instant())))
                    .setState(SnapshotRecord.State.CREATING)
                    .build();
            reserveSnapshot("snapshot " + name + " of volume " + sourceImage, record, source.getThinOvercommitRatio());
            crashes.reach(CrashPoint.SNAPSHOT_RECORDED);
            SnapshotRecord recorded = record;
            return new Pending() {
                @Override
                public boolean fresh() {
                    return true;
                }

                @Override
                public void copy() throws DeviceException {
                    volumes.snapshot(lv(sourceImage), lv(SNAPSHOT_PREFIX + name));
                }

                @Override
                public Snapshot finish() throws IOException {
                    crashes.reach(CrashPoint.SNAPSHOT_COPIED);
                    SnapshotRecord ready = snapshots.write(recorded.toBuilder().setState(SnapshotRecord.State.READY).build());
                    log.info("thin snapshot taken", "snapshot", name, "volume", sourceImage, "group", volumes.volumeGroup());
                    return PoolSnapshots.snapshot(ready);
                }
            };
        }

        /** Removes the snapshot; succeeds when already gone. Volumes restored from it keep their data. */
        @Override
        public void delete(String name) throws IOException, DeviceException, MountException {
            Optional<SnapshotRecord> record = snapshots.read(name);
            if (record.isEmpty()) {
                return;
            }
            SnapshotRecord deleting = snapshots.write(record.get().toBuilder().setState(SnapshotRecord.State.DELETING).build());
            crashes.reach(CrashPoint.SNAPSHOT_DELETE_RECORDED);
            finishSnapshotDelete(deleting);
            log.info("thin snapshot deleted", "snapshot", name, "group", volumes.volumeGroup());
        }

        @Override
        public List<Snapshot> commit(String group) throws IOException {
            return snapshots.commit(group).stream().map(PoolSnapshots::snapshot).toList();
        }

        @Override
        public List<Snapshot> list() throws IOException {
                return snapshots.all().stream().filter(PoolSnapshots::listed).map(PoolSnapshots::snapshot).toList();
            }

        @Override
        public Optional<Snapshot> listed(String name) throws IOException {
                return snapshots.read(name).filter(PoolSnapshots::listed).map(PoolSnapshots::snapshot);
            }

        @Override
        public boolean holds(String name) throws IOException {
                return snapshots.read(name).isPresent();
            }

        @Override
        public SnapshotRecord ready(String name) throws IOException {
            return snapshots.ready(name);
        }
    }

    private void finishSnapshotDelete(SnapshotRecord record) throws IOException, DeviceException, MountException {
        String volume = lv(SNAPSHOT_PREFIX + record.getName());
        Optional<LogicalVolume> found = volumes.find(volume);
        if (found.isPresent()) {
            requireUnused(volume, found);
            volumes.remove(volume);
            crashes.reach(CrashPoint.SNAPSHOT_DELETE_UNLINKED);
        }
        snapshots.delete(record.getName());
    }

    /** What a restore or clone starts from: the logical volume to snapshot, and what its record says of it. */
    private record Content(String volume, long capacityBytes, String filesystem, boolean usedAsBlock, boolean encrypted) { }

    /** NOT_FOUND unless the source is there, complete; INVALID_ARGUMENT for a linear source volume. */
    private Content content(Source source) throws IOException {
        return switch (source.getKindCase()) {
            case SNAPSHOT -> {
                SnapshotRecord snapshot = snapshots.ready(source.getSnapshot());
                yield new Content(SNAPSHOT_PREFIX + snapshot.getName(), snapshot.getCapacityBytes(), snapshot.getFilesystem(),
                        snapshot.getUsedAsBlock(), snapshot.getEncrypted());
            }
            case VOLUME -> {
                ImageRecord image = records.read(source.getVolume())
                        .filter(record -> record.getState() == ImageRecord.State.READY)
                        .orElseThrow(() -> CsiException.notFound("source volume " + source.getVolume() + " does not exist on this node"));
                if (image.getLvType() == ImageRecord.LvType.LINEAR) {
                    throw CsiException.invalidArgument("source volume " + source.getVolume()
                            + " is a linear logical volume; only thin volumes are cloned in an LVM pool");
                }
                yield new Content(image.getName(), image.getCapacityBytes(), image.getFilesystem(), image.getUsedAsBlock(),
                        image.getEncrypted());
            }
            case KIND_NOT_SET -> throw CsiException.invalidArgument("content source names neither a snapshot nor a volume");
        };
    }

    /**
     * What a new volume of that kind may take: linear within the free extents; thin within what
     * the sizes of the thin volumes and snapshots leave of the thin pool's size times the
     * overcommit ratio, and, without overcommit (a ratio of 1, or 0: unset), within the pool's
     * unwritten data too. Nothing while the thin pool is nearly full.
     */
    /**
     * Writes the record of a new thin snapshot ({@code forWhat}, as the error names it) once the thin
     * pool has room for its whole size; RESOURCE_EXHAUSTED, with nothing written, when not.
     */
    void reserveSnapshot(String forWhat, SnapshotRecord record, double overcommitRatio) throws IOException, DeviceException {
        synchronized (capacityLock) {
            long available = available(LvType.THIN, overcommitRatio);
            if (record.getCapacityBytes() > available) {
                throw CsiException.resourceExhausted(forWhat + " needs " + record.getCapacityBytes()
                        + " bytes of the thin pool in " + volumes.volumeGroup() + ", which has " + available);
            }
            snapshots.write(record);
        }
    }

    /** The snapshot records' store: a copy's storage keeps them as a snapshot's. */
    PoolSnapshotStore snapshotStore() {
        return snapshots;
    }

    @Override
    public SnapshotCopies snapshotCopies() {
        return snapshotCopies;
    }

    private long available(LvType lvType, double overcommitRatio) throws IOException, DeviceException {
        if (lvType == LvType.LINEAR) {
            return volumes.groupSpace().freeBytes();
        }
        return thinAvailable(volumes.thinPoolSpace(), overcommitRatio);
    }

    /** What a new thin volume may take in {@code pool}, as {@link #available} says; one lvs for a registration's every figure. */
    private long thinAvailable(Optional<LogicalVolumes.ThinPoolSpace> pool, double overcommitRatio) throws IOException {
        if (pool.isEmpty() || takesNone(pool.get())) {
            return 0;
        }
        long reserved = thinReserved();
        if (overcommitRatio > 1) {
            return Math.max(0, (long) (pool.get().sizeBytes() * overcommitRatio) - reserved);
        }
        long unwritten = (long) (pool.get().sizeBytes() * (100 - pool.get().dataPercent()) / 100);
        return Math.max(0, Math.min(pool.get().sizeBytes() - reserved, unwritten));
    }

    /** The sizes of every thin volume and snapshot together. */
    private long thinReserved() throws IOException {
        return records.all().stream()
                .filter(record -> record.getLvType() != ImageRecord.LvType.LINEAR)
                .mapToLong(ImageRecord::getCapacityBytes).sum()
                + snapshots.all().stream().mapToLong(SnapshotRecord::getCapacityBytes).sum();
    }

    /** A thin pool nearly full, or one that does not zero new chunks, takes no new thin volume. */
    private static boolean takesNone(LogicalVolumes.ThinPoolSpace pool) {
        return !pool.zeroes() || pool.metadataPercent() >= FULL_PERCENT || pool.dataPercent() >= FULL_PERCENT;
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

    /**
     * The filesystem on the volume's device or, for an encrypted volume, on the dm-crypt mapping
     * stacked on it: a group snapshot's cut freezes that one, which the suspend of lvcreate's thin
     * snapshot does not reach (it freezes the filesystem of the logical volume's own device only).
     */
    @Override
    public Optional<Path> filesystemMount(String name) throws IOException, DeviceException, MountException {
        Optional<LogicalVolume> device = attachedDevice(name);
        return device.isEmpty() ? Optional.empty()
                : ImagePool.filesystemMount(mounts.table().all(), device.get(), volumes.holders(device.get()));
    }

    private List<MountPoint> inUse(LogicalVolume volume) throws MountException {
        return mounts.table().all().stream().filter(volume::backs).toList();
    }

    /** The active volume's device-mapper device. */
    @Override
    public Optional<LogicalVolume> attachedDevice(String name) throws DeviceException {
        return volumes.find(lv(name)).filter(LogicalVolume::active);
    }

    /** A logical volume's device goes only when deactivated: the attached one is the only one. */
    @Override
    public Optional<LogicalVolume> device(String name) throws DeviceException {
        return attachedDevice(name);
    }

    /** The size lvs gave with the device, when it is a logical volume read in this call: no second lvs. */
    @Override
    public long deviceBytes(BlockDevice device) throws DeviceException {
        if (device instanceof LogicalVolume volume) {
            return volume.sizeBytes();
        }
        return volumes.list().stream().filter(volume -> volume.device().equals(device.device())).findFirst()
                .orElseThrow(() -> new DeviceException("no logical volume of group " + volumes.volumeGroup() + " at " + device.device()))
                .sizeBytes();
    }

    /** lvextend grows an active volume's device-mapper device itself. */
    @Override
    public void refreshDevice(BlockDevice device) {
    }

    @Override
    public Optional<String> abnormality(String name) throws IOException, DeviceException {
        if (volumes.find(lv(name)).isEmpty()) {
            return Optional.of("logical volume " + lv(name) + " is missing from group " + volumes.volumeGroup()
                    + "; the volume lives on only while it stays mounted");
        }
        if (!exists(name)) {
            return Optional.of("the pool has no record of volume " + name);
        }
        return Optional.empty();
    }

    @Override
    public RecordStore records() {
        return records;
    }

    void checkName(String name) {
        LocalVolumeId.checkName(name);
        lv(name);
    }

    /**
     * The logical volume of a volume, or of a snapshot ({@link #SNAPSHOT_PREFIX} and its name): the
     * name itself where LVM takes it and its device-mapper name ({@code <group>-<name>}, dashes
     * doubled) fits the kernel's {@value #DM_NAME_MAX} characters, as external-provisioner's
     * {@code pvc-<uid>} always does. Any other CSI name (up to 128 characters, or one LVM refuses)
     * gets {@value #HASHED_PREFIX}, as much of it as fits, and a hash of all of it: always the same
     * logical volume for the same name, so nothing needs recording and a retried call finds it.
     * INVALID_ARGUMENT when the group's own name leaves no room even for that.
     */
    String lv(String name) {
        int room = DM_NAME_MAX - dmLength(volumes.volumeGroup()) - 1;
        if (dmLength(name) <= room && lvmTakes(name)) {
            return name;
        }
        String hash = HexFormat.of().formatHex(sha256(name)).substring(0, 32);
        int left = room - HASHED_PREFIX.length() - 1 - hash.length();
        if (left < 0) {
            throw CsiException.invalidArgument("volume name '" + name + "' is too long for a logical volume of group "
                    + volumes.volumeGroup() + ": its device-mapper name would have more than " + DM_NAME_MAX + " characters");
        }
        StringBuilder head = new StringBuilder();
        for (char c : name.toCharArray()) {
            int length = c == '-' ? 2 : 1;
            if (length > left) {
                break;
            }
            head.append(c == '_' ? '.' : c); // LVM's reserved suffixes (_tdata, _rimage, ...) all have an underscore
            left -= length;
        }
        return HASHED_PREFIX + head + "." + hash;
    }

    /** Names LVM refuses for a logical volume, as lvm2's apply_lvname_restrictions says. */
    private static boolean lvmTakes(String name) {
        return !name.startsWith("snapshot") && !name.startsWith("pvmove") && !name.equals(".") && !name.equals("..")
                && RESERVED_PARTS.stream().noneMatch(name::contains);
    }

    private static int dmLength(String name) {
        return name.length() + (int) name.chars().filter(c -> c == '-').count();
    }

    private static byte[] sha256(String name) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(name.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }

    CsiException missing(String name) {
        return CsiException.internal("the logical volume of volume " + name + " is missing from group " + volumes.volumeGroup());
    }

    private static String kind(LvType lvType) {
        return lvType == LvType.LINEAR ? "linear" : "thin";
    }

    /** ALREADY_EXISTS unless the READY volume's record has the size, type and source a repeated create asks for. */
    private static void requireSame(ImageRecord record, long capacityBytes, LvType lvType, Optional<Source> wantedSource) {
        Optional<Source> has = record.hasSource() ? Optional.of(record.getSource()) : Optional.empty();
        if (record.getCapacityBytes() != capacityBytes || lvType(record) != lvType || !has.equals(wantedSource)) {
            throw CsiException.alreadyExists("volume " + record.getName() + " exists with " + record.getCapacityBytes()
                    + " bytes, " + kind(lvType(record)) + ", " + ImagePool.describe(has) + "; asked for " + capacityBytes + " bytes, "
                    + kind(lvType) + ", " + ImagePool.describe(wantedSource));
        }
    }

    /** The record's own enum (local_record.proto) and the agent API's: the same values, kept apart so either can change. */
    static ImageRecord.LvType recorded(LvType lvType) {
        return switch (lvType) {
            case THIN -> ImageRecord.LvType.THIN;
            case LINEAR -> ImageRecord.LvType.LINEAR;
            case LV_TYPE_UNSPECIFIED -> ImageRecord.LvType.LV_TYPE_UNSPECIFIED;
            default -> throw new IllegalArgumentException("lvType " + lvType);
        };
    }

    static LvType lvType(ImageRecord record) {
        return switch (record.getLvType()) {
            case THIN -> LvType.THIN;
            case LINEAR -> LvType.LINEAR;
            default -> LvType.LV_TYPE_UNSPECIFIED;
        };
    }

    static Volume image(ImageRecord record, Optional<LogicalVolume> volume) {
        return ImagePool.apiImage(record, volume.filter(LogicalVolume::active).map(v -> v.device().toString()).orElse(""))
                .toBuilder().setPool(PoolKind.POOL_LVM).setLvType(lvType(record)).build();
    }
}
