package dev.strata.csi.backend.local;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.agent.api.ImageRecord;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.volume.VolumeId;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A node's storage pool: a directory of image files, each with its record. The record holds the
 * desired state (exists, attached); the kernel holds the actual state (loop devices). Every
 * operation writes its intent to the record before it acts, so a crash between any two steps
 * leaves a state that the retried call, or {@link #reconcile()} at the next start, completes.
 * Callers serialise operations per image name.
 */
public final class ImagePool {

    static final String IMAGE_SUFFIX = ".img";

    private final Path dir;
    private final RecordStore records;
    private final ImageFiles files;
    private final LoopDevices loops;
    private final Mounter mounts;
    private final Log log;
    /** Held from the capacity check to the intent record, so two creates cannot both take the last space. */
    private final java.util.concurrent.locks.ReentrantLock capacity = new java.util.concurrent.locks.ReentrantLock();

    public ImagePool(Path dir, ImageFiles files, LoopDevices loops, Mounter mounts, Log log) {
        this.dir = dir;
        this.records = new RecordStore(dir, log);
        this.files = files;
        this.loops = loops;
        this.mounts = mounts;
        this.log = log;
    }

    public Path dir() {
        return dir;
    }

    /** Creates the image, or returns it when it exists with the same size and allocation. */
    public Image create(String name, long capacityBytes, Allocation allocation) throws IOException, DeviceException, MountException {
        VolumeId.checkName(name);
        Optional<ImageRecord> existing = records.read(name);
        if (existing.isPresent()) {
            ImageRecord record = existing.get();
            switch (record.getState()) {
                case READY -> {
                    if (record.getCapacityBytes() != capacityBytes || record.getAllocation() != allocation) {
                        throw CsiException.alreadyExists("volume " + name + " exists with " + record.getCapacityBytes()
                                + " bytes, " + record.getAllocation() + "; asked for " + capacityBytes + " bytes, " + allocation);
                    }
                    return image(record);
                }
                case DELETING -> finishDelete(record);
                default -> { } // CREATING: an interrupted create holds no data; do it again
            }
        } else if (Files.exists(imagePath(name))) {
            throw CsiException.failedPrecondition("pool " + dir + " holds an image file for " + name
                    + " without a record; the driver does not touch data it cannot account for");
        }
        ImageRecord record = ImageRecord.newBuilder()
                .setName(name)
                .setCapacityBytes(capacityBytes)
                .setAllocation(allocation)
                .setState(ImageRecord.State.CREATING)
                .build();
        capacity.lock();
        try {
            long available = status().getAvailableBytes() + existing.map(this::reservedBy).orElse(0L);
            if (capacityBytes > available) {
                throw CsiException.resourceExhausted("pool " + dir + " has " + available + " bytes available; volume "
                        + name + " needs " + capacityBytes);
            }
            records.write(record); // from here on the record reserves the capacity
        } finally {
            capacity.unlock();
        }
        files.create(imagePath(name), capacityBytes, allocation);
        record = record.toBuilder().setState(ImageRecord.State.READY).build();
        records.write(record);
        log.info("image created", "volume", name, "bytes", capacityBytes, "allocation", allocation);
        return image(record, null); // a file made just now has no loop device
    }

    /** Deletes the image and its record; succeeds when already gone. */
    public void delete(String name) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty()) {
            return;
        }
        Optional<LoopDevice> device = unusedDevice(name);
        ImageRecord deleting = record.get().toBuilder().setState(ImageRecord.State.DELETING).setAttached(false).build();
        records.write(deleting);
        finishDelete(deleting, device); // the device was found unused just now, under the volume's lock
        log.info("image deleted", "volume", name);
    }

    /** Attaches the image to a loop device for {@code nodeId}, or returns the device it is attached to. */
    public Image attach(String name, String nodeId) throws IOException, DeviceException, MountException {
        ImageRecord record = ready(name);
        if (!record.getAttached() || !record.getPublishedNodeIdsList().contains(nodeId)) {
            ImageRecord.Builder wanted = record.toBuilder().setAttached(true);
            if (!record.getPublishedNodeIdsList().contains(nodeId)) {
                wanted.addPublishedNodeIds(nodeId);
            }
            record = wanted.build();
            records.write(record);
        }
        Path image = imagePath(name);
        LoopDevice device = loops.find(image).orElse(null);
        if (device == null) {
            device = loops.attach(image);
            log.info("image attached", "volume", name, "device", device.device(), "direct_io", device.directIo());
        }
        return image(record, device);
    }

    /** Detaches the image's loop device; succeeds when not attached. FAILED_PRECONDITION while mounted. */
    public void detach(String name, String nodeId) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty()) {
            return;
        }
        Optional<LoopDevice> device = unusedDevice(name);
        ImageRecord current = record.get();
        List<String> published = new ArrayList<>(current.getPublishedNodeIdsList());
        published.remove(nodeId);
        if (current.getAttached() || published.size() != current.getPublishedNodeIdsCount()) {
            records.write(current.toBuilder().setAttached(false).clearPublishedNodeIds().addAllPublishedNodeIds(published).build());
        }
        if (device.isPresent()) {
            loops.detach(device.get().device());
            log.info("image detached", "volume", name, "device", device.get().device());
        }
    }

    /** Whether the image exists and is ready, as its record says; cheaper than {@link #get}, which finds its device. */
    public boolean exists(String name) throws IOException {
        return records.read(name).filter(record -> record.getState() == ImageRecord.State.READY).isPresent();
    }

    public Optional<Image> get(String name) throws IOException, DeviceException {
        Optional<ImageRecord> record = records.read(name);
        if (record.isEmpty() || record.get().getState() != ImageRecord.State.READY) {
            return Optional.empty();
        }
        return Optional.of(image(record.get()));
    }

    public List<Image> list() throws IOException, DeviceException {
        // One sysfs scan for all images, not one per image: ListVolumes asks for every volume.
        java.util.Map<Path, LoopDevice> devices = new java.util.HashMap<>();
        for (LoopDevice device : loops.list()) {
            devices.putIfAbsent(device.backingFile(), device);
        }
        List<Image> images = new ArrayList<>();
        for (ImageRecord record : records.all()) {
            Path image = imagePath(record.getName());
            if (record.getState() == ImageRecord.State.READY) {
                images.add(image(record, Files.exists(image) ? devices.get(image) : null));
            }
        }
        return images;
    }

    /** What the image holds as far as the driver knows: the record of a READY image. */
    public ImageRecord content(String name) throws IOException {
        return ready(name);
    }

    /** Remembers that the image now holds {@code filesystem}: it will never be formatted again. */
    public void recordFilesystem(String name, String filesystem) throws IOException {
        ImageRecord record = ready(name);
        if (!record.getFilesystem().equals(filesystem)) {
            records.write(record.toBuilder().setFilesystem(filesystem).build());
        }
    }

    /** Remembers that the image was used as a raw block device: it will never be formatted. */
    public void recordBlockUse(String name) throws IOException {
        ImageRecord record = ready(name);
        if (!record.getUsedAsBlock()) {
            records.write(record.toBuilder().setUsedAsBlock(true).build());
        }
    }

    /** Capacity a new image can safely get: free space less what sparse images may still claim. */
    public PoolStatus status() throws IOException {
        ImageFiles.Space space = files.space(dir);
        long reserved = 0;
        int count = 0;
        for (ImageRecord record : records.all()) {
            reserved += reservedBy(record);
            count++;
        }
        return PoolStatus.newBuilder()
                .setTotalBytes(space.totalBytes())
                .setAvailableBytes(Math.max(0, space.availableBytes() - reserved))
                .setImageCount(count)
                .build();
    }

    /**
     * Brings the kernel in line with the records after a crash or reboot: images that should be
     * attached are attached again, interrupted creates and deletes are finished, loop devices on
     * pool images that nothing wants are detached. Files it does not understand are left alone.
     */
    public void reconcile() throws IOException, DeviceException, MountException {
        int temporaries = records.removeTemporaries();
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
        for (LoopDevice device : loops.list()) {
            Path backing = device.backingFile();
            if (backing.getParent() != null && backing.getParent().equals(dir)) {
                String fileName = backing.getFileName().toString();
                String name = fileName.endsWith(IMAGE_SUFFIX) ? fileName.substring(0, fileName.length() - IMAGE_SUFFIX.length()) : fileName;
                try {
                    if (records.read(name).isEmpty() && inUse(device).isEmpty()) {
                        loops.detach(device.device());
                        log.warn("detached loop device of an image without a record", "device", device.device(), "file", backing);
                    }
                } catch (Exception e) {
                    log.error("cannot reconcile loop device; left as it is", "device", device.device(), "error", e.getMessage());
                }
            }
        }
    }

    private void reconcile(ImageRecord record) throws IOException, DeviceException, MountException {
        Path image = imagePath(record.getName());
        Optional<LoopDevice> device = loops.find(image);
        switch (record.getState()) {
            case READY -> {
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
            default -> {
                Files.deleteIfExists(image);
                records.delete(record.getName());
                log.info("removed interrupted create", "volume", record.getName());
            }
        }
    }

    private ImageRecord ready(String name) throws IOException {
        return records.read(name)
                .filter(record -> record.getState() == ImageRecord.State.READY)
                .orElseThrow(() -> CsiException.notFound("volume " + name + " does not exist on this node"));
    }

    private void finishDelete(ImageRecord record) throws IOException, DeviceException, MountException {
        finishDelete(record, unusedDevice(record.getName()));
    }

    private void finishDelete(ImageRecord record, Optional<LoopDevice> device) throws IOException, DeviceException {
        if (device.isPresent()) {
            loops.detach(device.get().device());
        }
        Files.deleteIfExists(imagePath(record.getName()));
        records.delete(record.getName());
    }

    /**
     * The image's loop device, if it has one; FAILED_PRECONDITION while a mount uses it. Also
     * found when the image file was deleted under it, so detaching and deleting still free it.
     */
    private Optional<LoopDevice> unusedDevice(String name) throws DeviceException, MountException {
        Path image = imagePath(name);
        Optional<LoopDevice> device = loops.find(image);
        if (device.isEmpty() && !Files.exists(image)) {
            device = loops.list().stream().filter(loop -> loop.backingFile().equals(image)).findFirst();
        }
        if (device.isPresent()) {
            List<MountPoint> users = inUse(device.get());
            if (!users.isEmpty()) {
                throw CsiException.failedPrecondition("volume " + name + " is in use: " + device.get().device()
                        + " is mounted at " + users.getFirst().mountPoint());
            }
        }
        return device;
    }

    /** The mounts that use the device: while there are any, it is never detached. */
    private List<MountPoint> inUse(LoopDevice device) throws MountException {
        return mounts.table().all().stream().filter(device::backs).toList();
    }

    /** Space the image may still take from the pool: what it has not allocated yet. */
    private long reservedBy(ImageRecord record) {
        boolean allocatedInFull = record.getAllocation() == Allocation.FULL && record.getState() == ImageRecord.State.READY;
        if (allocatedInFull || record.getState() == ImageRecord.State.DELETING) {
            return 0;
        }
        try {
            return Math.max(0, record.getCapacityBytes() - files.allocatedBytes(imagePath(record.getName())));
        } catch (IOException e) {
            return record.getCapacityBytes(); // cannot tell how much is allocated: reserve it all
        }
    }

    public Path imagePath(String name) {
        return dir.resolve(name + IMAGE_SUFFIX);
    }

    private Image image(ImageRecord record) throws DeviceException {
        return image(record, loops.find(imagePath(record.getName())).orElse(null));
    }

    private static Image image(ImageRecord record, LoopDevice device) {
        return Image.newBuilder()
                .setName(record.getName())
                .setCapacityBytes(record.getCapacityBytes())
                .setAllocation(record.getAllocation())
                .setDevicePath(device == null ? "" : device.device().toString())
                .addAllPublishedNodeIds(record.getPublishedNodeIdsList())
                .build();
    }
}
