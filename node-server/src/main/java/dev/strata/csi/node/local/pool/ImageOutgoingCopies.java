package dev.strata.csi.node.local.pool;

import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.image.ImageFiles;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.concurrent.TimeUnit;

/** The image pool's content for other nodes: an image file or a snapshot's file, read by its data ranges. */
final class ImageOutgoingCopies implements OutgoingCopies {

    private final ImagePool pool;
    private final ImageContent content;

    ImageOutgoingCopies(ImagePool pool, ImageFiles files) {
        this.pool = pool;
        this.content = new ImageContent(files);
    }

    @Override
    public OutgoingContent volume(String name) throws IOException, DeviceException {
        ImageRecord record = pool.content(name);
        if (pool.device(name).isPresent()) {
            throw CsiException.failedPrecondition("volume " + name + " is attached; a copy of a volume in use is read from a snapshot of it");
        }
        Path file = pool.imagePath(name);
        // Any write changes the ctime: another tag, so that a transfer cut short never resumes on other content.
        long changed = ((FileTime) Files.getAttribute(file, "unix:ctime")).to(TimeUnit.NANOSECONDS);
        return new OutgoingContent("image/" + name + "/" + record.getCapacityBytes() + "/" + changed, record.getCapacityBytes(),
                record.getFilesystem(), record.getUsedAsBlock(), record.getEncrypted(), (from, chunks) -> content.read(file, from, chunks),
                () -> { });
    }

    @Override
    public OutgoingContent snapshot(String name) throws IOException {
        SnapshotRecord record = pool.snapshots().ready(name);
        Path file = pool.snapshots().path(name);
        return new OutgoingContent(PoolSnapshots.contentTag(record), record.getCapacityBytes(), record.getFilesystem(),
                record.getUsedAsBlock(), record.getEncrypted(), (from, chunks) -> content.read(file, from, chunks), () -> { });
    }
}
