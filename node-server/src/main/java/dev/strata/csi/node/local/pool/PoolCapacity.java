package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageFiles;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.locks.ReentrantLock;

/**
 * What the pool can still give: the free space of its filesystem less what its images and
 * snapshots may still take ({@link #status()}). Whatever takes more of it (a create, an
 * expansion, a snapshot) is admitted through {@link #admit}, which checks for room and writes the
 * record that reserves it under one lock: from that record on, {@link #status()} counts the space
 * as taken, so two of them cannot both take the last space.
 */
final class PoolCapacity {

    /** Writes the record that reserves the admitted bytes; runs under the capacity lock. */
    @FunctionalInterface
    interface Reservation<T> {
        T reserve() throws IOException, DeviceException, MountException;
    }

    private final Path dir;
    private final ImageFiles files;
    private final RecordStore images;
    private final PoolSnapshotStore snapshots;
    /** Held from the capacity check to the intent record, so two creates cannot both take the last space. */
    private final ReentrantLock lock = new ReentrantLock();

    PoolCapacity(Path dir, ImageFiles files, RecordStore images, PoolSnapshotStore snapshots) {
        this.dir = dir;
        this.files = files;
        this.images = images;
        this.snapshots = snapshots;
    }

    /**
     * Runs {@code reservation} when the pool has {@code bytes} available for {@code forWhat} (as
     * the error names it: "volume pvc-1"), counting {@code reservedAlready} (what a record the
     * reservation replaces holds) as available; RESOURCE_EXHAUSTED, with nothing written, when not.
     */
    <T> T admit(String forWhat, long bytes, long reservedAlready, Reservation<T> reservation)
            throws IOException, DeviceException, MountException {
        lock.lock();
        try {
            long available = status().getAvailableBytes() + reservedAlready;
            if (bytes > available) {
                throw CsiException.resourceExhausted("pool " + dir + " has " + available + " bytes available; " + forWhat
                        + " needs " + bytes);
            }
            return reservation.reserve();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Capacity a new image can safely get: free space less what sparse images may still claim, what
     * snapshots being copied still take, and what reflinked blocks may need once written (a
     * snapshot's own files are in the free space already).
     */
    PoolStatus status() throws IOException {
        ImageFiles.Space space = files.space(dir);
        long reserved = 0;
        int count = 0;
        for (ImageRecord record : images.all()) {
            reserved += reservedBy(record);
            count++;
        }
        for (SnapshotRecord record : snapshots.all()) {
            reserved += reservedBy(record);
        }
        return PoolStatus.newBuilder()
                .setTotalBytes(space.totalBytes())
                .setAvailableBytes(Math.max(0, space.availableBytes() - reserved))
                .setVolumeCount(count)
                .build();
    }

    /**
     * Space the image may still take from the pool: what it has not allocated yet; all of its
     * capacity when it was made by a reflink, since each block it shares may need one of its own.
     */
    long reservedBy(ImageRecord record) {
        if (record.getReflinked() && record.getState() == ImageRecord.State.READY) {
            return record.getCapacityBytes();
        }
        boolean allocatedInFull = record.getAllocation() == ImageRecord.Allocation.FULL && record.getState() == ImageRecord.State.READY;
        if (allocatedInFull || record.getState() == ImageRecord.State.DELETING) {
            return 0;
        }
        try {
            return Math.max(0, record.getCapacityBytes() - files.allocatedBytes(images.imagePath(record.getName())));
        } catch (IOException e) {
            return record.getCapacityBytes(); // cannot tell how much is allocated: reserve it all
        }
    }

    /**
     * Space a snapshot may still take: while copied, what is left of the copy; once a reflink, its
     * blocks, which its source's writes would copy. A plain copy's blocks are taken already.
     */
    private long reservedBy(SnapshotRecord record) {
        Path file = snapshots.imagePath(record.getName());
        try {
            return switch (record.getState()) {
                case CREATING, RECEIVING -> Math.max(0, record.getCopyBytes() - files.allocatedBytes(file));
                case READY -> record.getReflinked() ? files.allocatedBytes(file) : 0;
                default -> 0;
            };
        } catch (IOException e) {
            return record.getCapacityBytes(); // cannot tell: reserve what the copy can take at most
        }
    }
}
