package dev.strata.csi.node.local.pool;

import com.google.protobuf.Timestamp;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.IoLimits;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.backend.local.records.Source;
import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.node.local.BlockDevice;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.ChangedBlocks;
import dev.strata.csi.node.local.fs.FilesystemFreezer;
import dev.strata.csi.node.local.image.ImageFiles;
import dev.strata.csi.node.local.image.LoopDevice;
import dev.strata.csi.node.local.image.LoopDevices;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A node's storage pool: a directory of image files, each with its record. The record holds the
 * desired state (exists, attached); the kernel holds the actual state (loop devices). Every
 * operation writes its intent to the record before it acts, so a crash between any two steps
 * leaves a state that the retried call, or {@link #reconcile()} at the next start, completes.
 * Callers serialise operations per image name.
 *
 * <p>Two invariants hold whatever was interrupted: an image is held by at most one loop device
 * (devices are told apart by the identity of their backing file, which survives restarts of the
 * container that attached them), and an image file is never removed while a loop device holds it.
 *
 * <p>The pool's snapshots are kept apart ({@link #snapshots()}); an image or a snapshot that takes
 * space is admitted against what the pool can still give ({@link PoolCapacity}). A new image can
 * start as a copy of a snapshot (restore) or of another image (clone), made consistent as a
 * snapshot is ({@link ConsistentCopy}).
 */
public final class ImagePool implements VolumePool {

    static final String IMAGE_SUFFIX = ".img";

    private final Path dir;
    private final RecordStore records;
    private final PoolCapacity capacity;
    private final ConsistentCopy copies;
    private final PoolSnapshots snapshots;
    private final IncomingCopies incoming;
    private final ImageOutgoingCopies outgoing;
    private final SnapshotCopies snapshotCopies;
    private final ImageChangedBlocks changedBlocks;
    private final ImageFiles files;
    private final LoopDevices loops;
    private final Mounter mounts;
    private final Log log;
    private final Crashes<CrashPoint> crashes;

    public ImagePool(Path dir, ImageFiles files, LoopDevices loops, Mounter mounts, FilesystemFreezer freezer, Crashes<CrashPoint> crashes,
            Clock clock, Log log) {
        this.dir = dir;
        this.crashes = crashes;
        this.records = new RecordStore(dir, log);
        PoolSnapshotStore snapshotStore = new PoolSnapshotStore(dir, log);
        this.capacity = new PoolCapacity(dir, files, records, snapshotStore);
        this.copies = new ConsistentCopy(dir, files, freezer, this::filesystemMount, crashes, log);
        this.snapshots = new PoolSnapshots(snapshotStore, records, capacity, copies, files, crashes, clock, log);
        this.incoming = new IncomingCopies(records, new ImageReceiving(this, files), clock, crashes, log);
        this.outgoing = new ImageOutgoingCopies(this, files);
        this.snapshotCopies = new SnapshotCopies(snapshotStore, new ImageCopyStorage(snapshotStore, capacity, files), clock, crashes, log);
        this.changedBlocks = new ImageChangedBlocks(snapshots, files);
        this.files = files;
        this.loops = loops;
        this.mounts = mounts;
        this.log = log;
    }

    public Path dir() {
        return dir;
    }

    @Override
    public PoolKind kind() {
        return PoolKind.POOL_IMAGE;
    }

    /** The pool's snapshots. */
    @Override
    public PoolSnapshots snapshots() {
        return snapshots;
    }

    /** The copies this pool receives from other nodes. */
    @Override
    public IncomingCopies incoming() {
        return incoming;
    }

    @Override
    public SnapshotCopies snapshotCopies() {
        return snapshotCopies;
    }

    /**
     * The filesystem on {@code device} or on a device stacked on it ({@code holders}: an encrypted
     * volume's dm-crypt mapping, whose filesystem a freeze of the volume's own device does not
     * reach); not a block volume's bind of the device node.
     */
    static Optional<Path> filesystemMount(List<MountPoint> mounts, BlockDevice device, List<DeviceNumber> holders) {
        return mounts.stream()
                .filter(mount -> device.backs(mount) || holders.contains(mount.device()))
                .filter(mount -> !mount.fsType().equals("devtmpfs") && !mount.fsType().equals("tmpfs"))
                .map(MountPoint::mountPoint)
                .findFirst();
    }

    /** The freezes of this node's filesystems, which a group snapshot's cut takes too, whatever the volume's pool. */
    Freezes freezes() {
        return copies.freezes();
    }

    /** The copies other nodes receive of this pool's images and snapshots. */
    @Override
    public OutgoingCopies outgoing() {
        return outgoing;
    }

    /** Snapshots' extent maps compared, their data read where those cannot tell. */
    @Override
    public ChangedBlocks changedBlocks() {
        return changedBlocks;
    }

    /**
     * Creates the image, empty or as a copy of {@code source} (a snapshot: restore; another image:
     * clone) grown to {@code capacityBytes}, or returns it when it exists with the same size,
     * allocation and source. A source that is not there: NOT_FOUND; one larger than the requested
     * size: OUT_OF_RANGE, as the CSI spec names it (nothing is ever cut off). A copied image keeps
     * its source's filesystem in its record, so it is never formatted; where the copy is smaller
     * than the image, the next stage grows the filesystem. Encrypted at rest or not: recorded, so
     * that the node stages it only as what it is; a copy holds its source's bytes, so it must be
     * what its source is: INVALID_ARGUMENT otherwise, before anything is made. An image pool never
     * overcommits: INVALID_ARGUMENT for an {@code overcommitRatio} above 1.
     */
    @Override
    public Volume create(String name, long capacityBytes, Allocation allocation, LvType lvType, Optional<ContentSource> source,
            boolean encrypted, double overcommitRatio) throws IOException, DeviceException, MountException {
        if (overcommitRatio > 1) {
            throw CsiException.invalidArgument("volume " + name + ": the image pool never overcommits; thin overcommit is the LVM pool's");
        }
        LocalVolumeId.checkName(name);
        Optional<Source> wantedSource = source.map(ImagePool::recorded);
        Optional<ImageRecord> existing = records.read(name);
        if (existing.isPresent()) {
            ImageRecord record = existing.get();
            switch (record.getState()) {
                case READY -> {
                    requireSame(record, capacityBytes, allocation, wantedSource);
                    requireSameEncryption(record, encrypted);
                    return image(record);
                }
                case DELETING -> finishDelete(record);
                case RECEIVING -> throw CsiException.alreadyExists("volume " + name
                        + " is being made with the content of another node's volume or snapshot");
                default -> { // CREATING: an interrupted create holds no data; removed as a delete would be, then made again
                    finishDelete(record);
                    existing = Optional.empty();
                }
            }
        } else {
            requireNoStrayFile(name);
        }
        ImageRecord.Builder wanted = ImageRecord.newBuilder()
                .setName(name)
                .setCapacityBytes(capacityBytes)
                .setAllocation(recorded(allocation))
                .setEncrypted(encrypted)
                .setState(ImageRecord.State.CREATING);
        Optional<ConsistentCopy.Content> content = Optional.empty();
        if (wantedSource.isPresent()) {
            content = Optional.of(content(wantedSource.get()));
            requireSourceEncryption(name, encrypted, wantedSource, content.get().encrypted());
            if (content.get().capacityBytes() > capacityBytes) {
                throw CsiException.outOfRange("volume " + name + " of " + capacityBytes + " bytes cannot hold " + describe(wantedSource)
                        + " of " + content.get().capacityBytes() + " bytes");
            }
            wanted.setSource(wantedSource.get())
                    .setFilesystem(content.get().filesystem())
                    .setUsedAsBlock(content.get().usedAsBlock())
                    .setGrowFilesystem(!content.get().filesystem().isEmpty() && content.get().capacityBytes() < capacityBytes);
        }
        ImageRecord record = wanted.build();
        reserve(record, existing);
        crashes.reach(content.isPresent() ? CrashPoint.RESTORE_RECORDED : CrashPoint.CREATE_RECORDED);
        if (content.isPresent()) {
            ImageFiles.CopyMethod copied = copies.copy(content.get(), imagePath(name));
            crashes.reach(CrashPoint.RESTORE_COPIED);
            // The copy is as large as its source, and sparse: grown, and allocated in full where asked; durable then (grow syncs).
            files.grow(imagePath(name), capacityBytes, allocation);
            record = record.toBuilder().setReflinked(copied == ImageFiles.CopyMethod.REFLINK).build();
            log.info("image copied", "volume", name, "from", describe(wantedSource), "how", copied, "bytes", capacityBytes);
        } else {
            files.create(imagePath(name), capacityBytes, allocation);
        }
        crashes.reach(CrashPoint.CREATE_ALLOCATED);
        record = record.toBuilder().setState(ImageRecord.State.READY).build();
        records.write(record);
        log.info("image created", "volume", name, "bytes", capacityBytes, "allocation", allocation);
        return image(record, null); // a file made just now has no loop device
    }

    /** ALREADY_EXISTS when the volume exists encrypted and a plain one is asked for, or the other way round. */
    static void requireSameEncryption(ImageRecord record, boolean encrypted) {
        if (record.getEncrypted() != encrypted) {
            throw CsiException.alreadyExists("volume " + record.getName() + " exists " + (record.getEncrypted() ? "encrypted" : "not encrypted")
                    + "; asked for " + (encrypted ? "an encrypted" : "a plain") + " volume");
        }
    }

    /** INVALID_ARGUMENT when a restore or clone is to be encrypted and its source is not, or the other way round. */
    static void requireSourceEncryption(String name, boolean encrypted, Optional<Source> source, boolean sourceEncrypted) {
        if (sourceEncrypted != encrypted) {
            throw CsiException.invalidArgument("volume " + name + " is to be " + (encrypted ? "encrypted" : "plain") + " but "
                    + describe(source) + " is " + (sourceEncrypted ? "encrypted" : "plain")
                    + "; a copy holds its source's bytes, so its StorageClass must have the same encryption");
        }
    }

    /** ALREADY_EXISTS unless the READY volume's record has the size, allocation and source a repeated create asks for. */
    static void requireSame(ImageRecord record, long capacityBytes, Allocation allocation, Optional<Source> wantedSource) {
        Optional<Source> has = record.hasSource() ? Optional.of(record.getSource()) : Optional.empty();
        if (record.getCapacityBytes() != capacityBytes || allocation(record) != allocation || !has.equals(wantedSource)) {
            throw CsiException.alreadyExists("volume " + record.getName() + " exists with " + record.getCapacityBytes()
                    + " bytes, " + allocation(record) + ", " + describe(has) + "; asked for " + capacityBytes + " bytes, "
                    + allocation + ", " + describe(wantedSource));
        }
    }

    /** FAILED_PRECONDITION when the pool holds an image file of that name without a record. */
    void requireNoStrayFile(String name) {
        if (Files.exists(imagePath(name))) {
            throw CsiException.failedPrecondition("pool " + dir + " holds an image file for " + name
                    + " without a record; the driver does not touch data it cannot account for");
        }
    }

    /**
     * Writes the new image's first record once the pool has room for it (what the {@code existing}
     * record it replaces reserved counts as room): from then on the record reserves its capacity.
     */
    void reserve(ImageRecord record, Optional<ImageRecord> existing) throws IOException, DeviceException, MountException {
        capacity.admit("volume " + record.getName(), record.getCapacityBytes(), existing.map(capacity::reservedBy).orElse(0L), () -> {
            records.write(record);
            return record;
        });
    }

    /** What a copy starts from; NOT_FOUND unless the source is there, complete. */
    private ConsistentCopy.Content content(Source source) throws IOException {
        return switch (source.getKindCase()) {
            case SNAPSHOT -> {
                SnapshotRecord snapshot = snapshots.ready(source.getSnapshot());
                yield ConsistentCopy.Content.ofSnapshot(snapshot, snapshots.path(snapshot.getName()));
            }
            case VOLUME -> {
                ImageRecord image = records.read(source.getVolume())
                        .filter(record -> record.getState() == ImageRecord.State.READY)
                        .orElseThrow(() -> CsiException.notFound("source volume " + source.getVolume() + " does not exist on this node"));
                yield ConsistentCopy.Content.ofImage(image, imagePath(image.getName()));
            }
            case KIND_NOT_SET -> throw CsiException.invalidArgument("content source names neither a snapshot nor an image");
        };
    }

    /**
     * The filesystem on the image's loop device, or on the dm-crypt mapping stacked on it for an
     * encrypted volume; not a block bind. What {@link ConsistentCopy} freezes for a copy of a live image.
     */
    @Override
    public Optional<Path> filesystemMount(String name) throws IOException, DeviceException, MountException {
        Optional<LoopDevice> device = soleDevice(name);
        if (device.isEmpty()) {
            return Optional.empty();
        }
        return filesystemMount(mounts.table().all(), device.get(), loops.holders(device.get()));
    }

    /** Deletes the image and its record; succeeds when already gone. */
    @Override
    public void delete(String name) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty()) {
            return;
        }
        List<LoopDevice> devices = unusedDevices(name);
        ImageRecord deleting = record.get().toBuilder().setState(ImageRecord.State.DELETING).setAttached(false).build();
        records.write(deleting);
        crashes.reach(CrashPoint.DELETE_RECORDED);
        finishDelete(deleting, devices); // the devices were found unused just now, under the volume's lock
        log.info("image deleted", "volume", name);
    }

    /** Attaches the image to a loop device for {@code nodeId}, or returns the device it is attached to. */
    @Override
    public Volume attach(String name, String nodeId) throws IOException, DeviceException, MountException {
        ImageRecord record = records.attached(records.ready(name), nodeId);
        crashes.reach(CrashPoint.ATTACH_RECORDED);
        LoopDevice device = soleDevice(name).orElse(null);
        if (device == null) {
            device = loops.attach(imagePath(name));
            log.info("image attached", "volume", name, "device", device.device(), "direct_io", device.directIo());
            crashes.reach(CrashPoint.ATTACH_ATTACHED);
        }
        return image(record, device);
    }

    /**
     * Grows the image to {@code capacityBytes}, keeping its allocation, and its loop device with it
     * when attached (in use or not: a running pod is never detached). The new size is recorded
     * before the file grows, so a crash in between leaves a record larger than its file, which the
     * retried call or the next start grows ({@link #reconcile()}). A size at or below the
     * recorded one changes nothing but finishing such a growth: nothing is ever shrunk.
     * RESOURCE_EXHAUSTED, with the image unchanged, when the pool cannot hold the difference.
     */
    @Override
    public Volume expand(String name, long capacityBytes) throws IOException, DeviceException, MountException {
        ImageRecord record = records.ready(name);
        if (capacityBytes > record.getCapacityBytes()) {
            ImageRecord grown = record.toBuilder().setCapacityBytes(capacityBytes).build();
            // Grown under the capacity lock: a fully allocated image reserves nothing once recorded, so its
            // new blocks are taken before the next check reads the free space.
            record = capacity.admit("growing volume " + name + " to " + capacityBytes + " bytes", capacityBytes - record.getCapacityBytes(), 0,
                    () -> {
                        records.write(grown); // from here on the record reserves the new capacity
                        crashes.reach(CrashPoint.EXPAND_RECORDED);
                        finishGrowth(grown);
                        return grown;
                    });
            log.info("image expanded", "volume", name, "bytes", capacityBytes);
        } else {
            finishGrowth(record);
        }
        return image(record);
    }

    /** Brings the file, and the loop device holding it, to the recorded size. */
    private void finishGrowth(ImageRecord record) throws IOException, DeviceException, MountException {
        Path image = imagePath(record.getName());
        if (files.sizeBytes(image) < record.getCapacityBytes()) {
            files.grow(image, record.getCapacityBytes(), allocation(record));
            crashes.reach(CrashPoint.EXPAND_GROWN);
        }
        Optional<LoopDevice> device = soleDevice(record.getName());
        if (device.isPresent() && loops.sizeBytes(device.get().device()) < record.getCapacityBytes()) {
            loops.refreshCapacity(device.get().device());
            log.info("loop device takes the image's new size", "volume", record.getName(), "device", device.get().device());
        }
    }

    /** Detaches the image's loop device; succeeds when not attached. FAILED_PRECONDITION while mounted. */
    @Override
    public void detach(String name, String nodeId) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty()) {
            return;
        }
        List<LoopDevice> devices = unusedDevices(name);
        records.detached(record.get(), nodeId);
        crashes.reach(CrashPoint.DETACH_RECORDED);
        for (LoopDevice device : devices) {
            loops.detach(device.device());
            log.info("image detached", "volume", name, "device", device.device());
            crashes.reach(CrashPoint.DETACH_DETACHED);
        }
    }

    @Override
    public Optional<Volume> get(String name) throws IOException, DeviceException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty() || record.get().getState() != ImageRecord.State.READY) {
            return Optional.empty();
        }
        return Optional.of(image(record.get()));
    }

    @Override
    public List<Volume> list() throws IOException, DeviceException {
        // One sysfs scan for all images, not one per image: ListVolumes asks for every volume.
        Map<FileIdentity, LoopDevice> devices = new HashMap<>();
        for (LoopDevice device : loops.list()) {
            devices.putIfAbsent(device.backing(), device);
        }
        List<Volume> images = new ArrayList<>();
        for (ImageRecord record : records.all()) {
            if (record.getState() == ImageRecord.State.READY) {
                images.add(image(record, identity(record.getName()).map(devices::get).orElse(null)));
            }
        }
        return images;
    }

    @Override
    public RecordStore records() {
        return records;
    }

    /** Capacity a new image can safely get ({@link PoolCapacity#status()}). */
    @Override
    public PoolStatus status() throws IOException {
        return capacity.status();
    }

    /**
     * Brings the kernel in line with the records after a crash or reboot: images that should be
     * attached are attached again, interrupted creates and deletes are finished, loop devices on
     * pool images that nothing wants are detached, and the snapshots' own leftovers are cleared
     * ({@link PoolSnapshots}). Files it does not understand are left alone.
     */
    @Override
    public void reconcile() throws IOException, DeviceException, MountException {
        copies.thawLeftovers(); // first: a frozen filesystem stops its volume's writers
        int temporaries = records.removeTemporaries() + snapshots.removeTemporaries();
        if (temporaries > 0) {
            log.info("removed temporary record files of interrupted writes", "count", temporaries);
        }
        for (ImageRecord record : records.all()) {
            try {
                reconcile(record);
            } catch (Exception e) {
                // One volume in trouble must not keep the node from serving every other volume.
                log.error("cannot reconcile volume; left as it is", "volume", record.getName(), "error", e.getMessage());
            }
        }
        snapshots.reconcile();
        Map<FileIdentity, Path> imageFiles = imageFiles();
        DeviceNumber poolFilesystem = FileIdentity.of(dir).device();
        for (LoopDevice device : loops.list()) {
            if (!device.backing().device().equals(poolFilesystem)) {
                continue; // on another filesystem: not a pool image
            }
            try {
                Optional<String> stranger = stranger(device, imageFiles.get(device.backing()));
                if (stranger.isPresent() && inUse(device).isEmpty()) {
                    loops.detach(device.device());
                    log.warn("detached loop device nothing wants", "device", device.device(), "file", device.backingFile(),
                            "reason", stranger.get());
                } else if (stranger.isPresent()) {
                    log.warn("loop device nothing wants is still mounted; left as it is", "device", device.device(),
                            "file", device.backingFile(), "reason", stranger.get());
                } else if (device.deleted() && device.backingFile().getNameCount() == 1
                        && device.backingFile().toString().endsWith(IMAGE_SUFFIX)) {
                    log.warn("a loop device holds a deleted image of a container that is gone; if it was this pool's "
                            + "(an image removed by hand while attached), detach it with losetup --detach",
                            "device", device.device(), "file", device.backingFile());
                }
            } catch (Exception e) {
                log.error("cannot reconcile loop device; left as it is", "device", device.device(), "error", e.getMessage());
            }
        }
    }

    /**
     * Why a device on the pool's filesystem is not a volume's, or empty when it is: it holds a pool
     * image that has no record, or an image file that was unlinked while attached (which releases
     * before this one could leave behind: its space comes back only once the device lets go).
     */
    private Optional<String> stranger(LoopDevice device, Path imageFile) throws IOException {
        if (imageFile != null) {
            return records.read(volumeName(imageFile)).isEmpty() ? Optional.of("image without a record") : Optional.empty();
        }
        return deletedImage(device).isPresent() ? Optional.of("image deleted while attached") : Optional.empty();
    }

    /**
     * The volume whose image file was removed while {@code device} held it, as far as the device
     * still tells: its backing file is unlinked and was a pool image in the pool directory. The
     * driver never removes an attached image; a person can. A device attached in a mount namespace
     * that is gone names its file relative to that namespace's mount, and could be anybody's: it
     * is only reported ({@link #reconcile()}), never taken for a volume's.
     */
    private Optional<String> deletedImage(LoopDevice device) {
        Path shown = device.backingFile();
        boolean poolImage = dir.equals(shown.getParent()) && shown.getFileName().toString().endsWith(IMAGE_SUFFIX);
        return device.deleted() && poolImage ? Optional.of(volumeName(shown)) : Optional.empty();
    }

    /** The pool's image files by identity. */
    private Map<FileIdentity, Path> imageFiles() throws IOException {
        Map<FileIdentity, Path> found = new HashMap<>();
        try (DirectoryStream<Path> images = Files.newDirectoryStream(dir, "*" + IMAGE_SUFFIX)) {
            for (Path image : images) {
                try {
                    found.put(FileIdentity.of(image), image);
                } catch (NoSuchFileException e) {
                    // removed since the listing
                }
            }
        }
        return found;
    }

    private static String volumeName(Path image) {
        String fileName = image.getFileName().toString();
        return fileName.substring(0, fileName.length() - IMAGE_SUFFIX.length());
    }

    private void reconcile(ImageRecord record) throws IOException, DeviceException, MountException {
        Path image = imagePath(record.getName());
        switch (record.getState()) {
            case READY -> {
                if (files.sizeBytes(image) < record.getCapacityBytes()) {
                    files.grow(image, record.getCapacityBytes(), allocation(record));
                    log.info("finished interrupted expansion", "volume", record.getName(), "bytes", record.getCapacityBytes());
                }
                Optional<LoopDevice> device = soleDevice(record.getName());
                if (record.getAttached()) {
                    if (device.isEmpty()) {
                        LoopDevice attached = loops.attach(image);
                        log.info("reattached image", "volume", record.getName(), "device", attached.device());
                    }
                } else if (device.isPresent() && inUse(device.get()).isEmpty()) {
                    loops.detach(device.get().device());
                    log.info("detached image nothing wants attached", "volume", record.getName());
                }
            }
            case DELETING -> {
                finishDelete(record);
                log.info("finished interrupted delete", "volume", record.getName());
            }
            case RECEIVING -> log.info("image partly received from another node; the retried create resumes it",
                    "volume", record.getName(), "received_bytes", record.getReceivedBytes());
            default -> {
                finishDelete(record);
                log.info("removed interrupted create", "volume", record.getName());
            }
        }
    }

    /**
     * Removes the image and its record, its unused loop devices detached first; FAILED_PRECONDITION
     * while one is mounted. Deletes, and creates cut short: the driver attaches only READY images,
     * but a person's losetup can hold any, and an image file is never removed while attached.
     */
    void finishDelete(ImageRecord record) throws IOException, DeviceException, MountException {
        finishDelete(record, unusedDevices(record.getName()));
    }

    private void finishDelete(ImageRecord record, List<LoopDevice> devices) throws IOException, DeviceException {
        for (LoopDevice device : devices) {
            loops.detach(device.device());
            crashes.reach(CrashPoint.DELETE_DETACHED);
        }
        List<LoopDevice> holding = devicesOf(record.getName());
        if (!holding.isEmpty()) { // attached again behind the driver's back since it looked
            throw CsiException.failedPrecondition("volume " + record.getName() + " is held by " + holding.getFirst().device()
                    + "; its image is not deleted while attached");
        }
        Files.deleteIfExists(imagePath(record.getName()));
        crashes.reach(CrashPoint.DELETE_UNLINKED);
        records.delete(record.getName());
    }

    /** The image's loop devices (normally none or one); FAILED_PRECONDITION while a mount uses any. */
    private List<LoopDevice> unusedDevices(String name) throws IOException, DeviceException, MountException {
        List<LoopDevice> devices = devicesOf(name);
        for (LoopDevice device : devices) {
            List<MountPoint> users = inUse(device);
            if (!users.isEmpty()) {
                throw CsiException.failedPrecondition("volume " + name + " is in use: " + device.device()
                        + " is mounted at " + users.getFirst().mountPoint());
            }
        }
        return devices;
    }

    /**
     * The image's one loop device, if it has one. Should an image be held by several (an older
     * release attached images again after a container restart), the one in use, else the first, is
     * kept and the others are detached when nothing uses them.
     */
    private Optional<LoopDevice> soleDevice(String name) throws IOException, DeviceException, MountException {
        List<LoopDevice> devices = devicesOf(name);
        if (devices.size() <= 1) {
            return devices.stream().findFirst();
        }
        LoopDevice kept = devices.getFirst();
        for (LoopDevice device : devices) {
            if (!inUse(device).isEmpty()) {
                kept = device;
                break;
            }
        }
        for (LoopDevice device : devices) {
            if (device.equals(kept)) {
                continue;
            }
            if (inUse(device).isEmpty()) {
                loops.detach(device.device());
                log.warn("detached a second loop device of one image", "volume", name, "device", device.device(), "kept", kept.device());
            } else {
                log.error("image is mounted through two loop devices; unmount one", "volume", name,
                        "device", device.device(), "kept", kept.device());
            }
        }
        return Optional.of(kept);
    }

    /** The image's loop device, if it has one. */
    @Override
    public Optional<LoopDevice> device(String name) throws IOException, DeviceException {
        return devicesOf(name).stream().findFirst();
    }

    /**
     * Every loop device holding the image, told by its backing file's identity; when the file was
     * removed under them, the devices that still name it, so that detaching and deleting free them.
     */
    private List<LoopDevice> devicesOf(String name) throws IOException, DeviceException {
        Optional<FileIdentity> identity = identity(name);
        if (identity.isPresent()) {
            return loops.list().stream().filter(device -> device.backing().equals(identity.get())).toList();
        }
        DeviceNumber poolFilesystem = FileIdentity.of(dir).device();
        List<LoopDevice> named = new ArrayList<>();
        for (LoopDevice device : loops.list()) {
            if (device.backing().device().equals(poolFilesystem) && deletedImage(device).equals(Optional.of(name))) {
                named.add(device);
            }
        }
        return named;
    }

    private Optional<FileIdentity> identity(String name) throws IOException {
        return FileIdentity.ofExisting(imagePath(name));
    }

    /** The mounts that use the device: while there are any, it is never detached. */
    private List<MountPoint> inUse(LoopDevice device) throws MountException {
        return mounts.table().all().stream().filter(device::backs).toList();
    }

    /** The loop device holding the image file that is there now (a device of an image removed from under it is not). */
    @Override
    public Optional<LoopDevice> attachedDevice(String name) throws DeviceException {
        return loops.find(imagePath(name));
    }

    @Override
    public long deviceBytes(BlockDevice device) throws DeviceException {
        return loops.sizeBytes(device.device());
    }

    /** LOOP_SET_CAPACITY: a loop device keeps its size until told its file grew. */
    @Override
    public void refreshDevice(BlockDevice device) throws DeviceException {
        loops.refreshCapacity(device.device());
    }

    /** The image file or the pool's record of it gone from under a mounted volume. */
    @Override
    public Optional<String> abnormality(String name) throws IOException {
        Path image = imagePath(name);
        if (!Files.exists(image)) {
            return Optional.of("image file " + image + " is missing; the volume lives on only while it stays mounted");
        }
        if (!exists(name)) {
            return Optional.of("the pool has no record of volume " + name);
        }
        return Optional.empty();
    }

    public Path imagePath(String name) {
        return records.imagePath(name);
    }

    private Volume image(ImageRecord record) throws IOException, DeviceException {
        return image(record, device(record.getName()).orElse(null));
    }

    private static Volume image(ImageRecord record, LoopDevice device) {
        return apiImage(record, device == null ? "" : device.device().toString());
    }

    /** The agent API's image of a record, with the device that holds it ({@code ""}: none). */
    static Volume apiImage(ImageRecord record, String devicePath) {
        Volume.Builder image = Volume.newBuilder();
        if (record.hasSource()) {
            image.setSource(switch (record.getSource().getKindCase()) {
                case SNAPSHOT -> ContentSource.newBuilder().setSnapshot(record.getSource().getSnapshot());
                case VOLUME -> ContentSource.newBuilder().setVolume(record.getSource().getVolume());
                case KIND_NOT_SET -> ContentSource.newBuilder();
            });
        }
        return image
                .setName(record.getName())
                .setCapacityBytes(record.getCapacityBytes())
                .setAllocation(allocation(record))
                .setDevicePath(devicePath)
                .addAllPublishedNodeIds(record.getPublishedNodeIdsList())
                .setIoLimits(ioLimits(record.getIoLimits()))
                .setEncrypted(record.getEncrypted())
                .build();
    }

    /** The recorded limits as the agent API reports them: only the limits there are. */
    private static dev.strata.csi.agent.api.IoLimits ioLimits(IoLimits recorded) {
        var limits = dev.strata.csi.agent.api.IoLimits.newBuilder();
        if (recorded.getReadIops() > 0) {
            limits.setReadIops(recorded.getReadIops());
        }
        if (recorded.getWriteIops() > 0) {
            limits.setWriteIops(recorded.getWriteIops());
        }
        if (recorded.getReadBytesPerSecond() > 0) {
            limits.setReadBytesPerSecond(recorded.getReadBytesPerSecond());
        }
        if (recorded.getWriteBytesPerSecond() > 0) {
            limits.setWriteBytesPerSecond(recorded.getWriteBytesPerSecond());
        }
        return limits.build();
    }

    /** A record's time stamp. */
    static Timestamp timestamp(Instant instant) {
        return Timestamp.newBuilder().setSeconds(instant.getEpochSecond()).setNanos(instant.getNano()).build();
    }

    /** The agent API's content source as the record keeps it; INVALID_ARGUMENT for a name no snapshot or volume can have. */
    static Source recorded(ContentSource source) {
        return switch (source.getKindCase()) {
            case SNAPSHOT -> {
                LocalSnapshotId.checkName(source.getSnapshot());
                yield Source.newBuilder().setSnapshot(source.getSnapshot()).build();
            }
            case VOLUME -> {
                LocalVolumeId.checkName(source.getVolume());
                yield Source.newBuilder().setVolume(source.getVolume()).build();
            }
            case KIND_NOT_SET -> throw CsiException.invalidArgument("content source names neither a snapshot nor an image");
        };
    }

    static String describe(Optional<Source> source) {
        if (source.isEmpty()) {
            return "empty";
        }
        return source.get().hasSnapshot() ? "from snapshot " + source.get().getSnapshot() : "from volume " + source.get().getVolume();
    }

    /** The record's own enum (local_record.proto) and the agent API's: the same values, kept apart so either can change. */
    static ImageRecord.Allocation recorded(Allocation allocation) {
        return switch (allocation) {
            case SPARSE -> ImageRecord.Allocation.SPARSE;
            case FULL -> ImageRecord.Allocation.FULL;
            case ALLOCATION_UNSPECIFIED -> ImageRecord.Allocation.ALLOCATION_UNSPECIFIED;
            default -> throw new IllegalArgumentException("allocation " + allocation);
        };
    }

    static Allocation allocation(ImageRecord record) {
        return switch (record.getAllocation()) {
            case SPARSE -> Allocation.SPARSE;
            case FULL -> Allocation.FULL;
            default -> Allocation.ALLOCATION_UNSPECIFIED;
        };
    }
}
