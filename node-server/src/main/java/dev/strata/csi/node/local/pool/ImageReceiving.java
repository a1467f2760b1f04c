package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.image.ImageFiles;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.util.Optional;

/**
 * The image pool's storage for copies from other nodes: an image file made empty (sparse, or
 * allocated in full as asked), which reads as zeros wherever the stream writes nothing.
 */
final class ImageReceiving implements ReceivingStorage {

    private final ImagePool pool;
    private final ImageFiles files;
    private final ImageContent content;

    ImageReceiving(ImagePool pool, ImageFiles files) {
        this.pool = pool;
        this.files = files;
        this.content = new ImageContent(files);
    }

    @Override
    public PoolKind kind() {
        return PoolKind.POOL_IMAGE;
    }

    @Override
    public ImageRecord plan(ImageRecord.Builder record, double overcommitRatio) {
        if (overcommitRatio > 1) {
            throw CsiException.invalidArgument("volume " + record.getName() + ": the image pool never overcommits; thin overcommit is the LVM pool's");
        }
        return record.build();
    }

    @Override
    public void clear(String name, Optional<ImageRecord> existing) throws IOException, DeviceException, MountException {
        if (existing.isPresent()) {
            pool.finishDelete(existing.get());
        } else {
            pool.requireNoStrayFile(name);
        }
    }

    @Override
    public void reserve(ImageRecord record) throws IOException, DeviceException, MountException {
        pool.reserve(record, Optional.empty());
    }

    @Override
    public void create(ImageRecord record) throws IOException {
        files.create(pool.imagePath(record.getName()), record.getCapacityBytes(), ImagePool.allocation(record));
    }

    @Override
    public void empty(ImageRecord record) throws IOException {
        create(record);
    }

    @Override
    public IncomingContent open(ImageRecord record) throws IOException {
        return new IncomingContent(pool.imagePath(record.getName()), record.getCapacityBytes(), false, content::digest, () -> { });
    }

    @Override
    public Volume image(ImageRecord record) {
        return ImagePool.apiImage(record, "");
    }

    @Override
    public void delete(String name) throws IOException, DeviceException, MountException {
        pool.delete(name);
    }
}
