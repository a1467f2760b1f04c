package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.image.ImageFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * The image pool's snapshot copies: a file in its snapshot area, as its own snapshots are, made
 * sparse and empty, or as a copy of the base copy's file (a reflink where the filesystem can, else
 * a sparse copy); a range the source reads as zeros becomes a hole (fallocate PUNCH_HOLE).
 */
final class ImageCopyStorage implements SnapshotCopies.Storage {

    private final PoolSnapshotStore store;
    private final PoolCapacity capacity;
    private final ImageFiles files;
    private final ImageContent content;

    ImageCopyStorage(PoolSnapshotStore store, PoolCapacity capacity, ImageFiles files) {
        this.store = store;
        this.capacity = capacity;
        this.files = files;
        this.content = new ImageContent(files);
    }

    @Override
    public PoolKind kind() {
        return PoolKind.POOL_IMAGE;
    }

    @Override
    public void reserve(SnapshotRecord record) throws IOException, DeviceException, MountException {
        capacity.admit("a copy of snapshot " + record.getName(), record.getCopyBytes(), 0, () -> store.write(record));
    }

    @Override
    public boolean create(SnapshotRecord record, Optional<SnapshotRecord> base) throws IOException {
        Path file = store.imagePath(record.getName());
        if (base.isEmpty()) {
            files.create(file, record.getCapacityBytes(), Allocation.SPARSE);
            return false;
        }
        ImageFiles.CopyMethod copied = files.copy(store.imagePath(base.get().getName()), file);
        files.grow(file, record.getCapacityBytes(), Allocation.SPARSE); // the volume grew since its base was taken
        return copied == ImageFiles.CopyMethod.REFLINK;
    }

    @Override
    public IncomingContent open(SnapshotRecord record) throws IOException {
        Path file = store.imagePath(record.getName());
        return new IncomingContent(file, record.getCapacityBytes(), false, !record.getBaseSnapshot().isEmpty(),
                (channel, offset, length) -> files.punchHole(file, offset, length), content::digest, () -> { });
    }

    @Override
    public void remove(SnapshotRecord record) throws IOException {
        Files.deleteIfExists(store.imagePath(record.getName()));
    }
}
