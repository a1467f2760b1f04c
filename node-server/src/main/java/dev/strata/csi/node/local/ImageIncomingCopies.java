package dev.strata.csi.node.local;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.Source;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * The image pool's copies from other nodes: an image file made empty (sparse, or allocated in full
 * as asked) that reads as zeros wherever the stream writes nothing, its capacity reserved as a
 * create's.
 */
final class ImageIncomingCopies implements IncomingCopies {

    private final ImagePool pool;
    private final ReceivingRecords receiving;
    private final ImageFiles files;
    private final ImageContent content;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    ImageIncomingCopies(ImagePool pool, ReceivingRecords receiving, ImageFiles files, Crashes<CrashPoint> crashes, Log log) {
        this.pool = pool;
        this.receiving = receiving;
        this.files = files;
        this.content = new ImageContent(files);
        this.crashes = crashes;
        this.log = log;
    }

    @Override
    public ImageRecord receive(String name, long capacityBytes, Allocation allocation, ContentSource source, boolean encrypted,
            double overcommitRatio) throws IOException, DeviceException, MountException {
        if (overcommitRatio > 1) {
            throw CsiException.invalidArgument("volume " + name + ": the image pool never overcommits; thin overcommit is the LVM pool's");
        }
        Source from = ImagePool.recorded(source);
        ImageRecord.Allocation recorded = ImagePool.recorded(allocation);
        Optional<ImageRecord> ready = receiving.existing(name, capacityBytes, recorded, from, encrypted);
        if (ready.isPresent()) {
            return ready.get();
        }
        Optional<ImageRecord> existing = pool.records().read(name);
        if (existing.isPresent()) {
            pool.finishDelete(existing.get()); // CREATING holds no data; DELETING is finished
        } else {
            pool.requireNoStrayFile(name);
        }
        ImageRecord record = ImageRecord.newBuilder()
                .setName(name)
                .setCapacityBytes(capacityBytes)
                .setAllocation(recorded)
                .setState(ImageRecord.State.CREATING)
                .setSource(from)
                .setEncrypted(encrypted)
                .build();
        pool.reserve(record, Optional.empty());
        crashes.reach(CrashPoint.CREATE_RECORDED);
        files.create(pool.imagePath(name), capacityBytes, allocation);
        crashes.reach(CrashPoint.CREATE_ALLOCATED);
        record = receiving.progressed(record.toBuilder());
        log.info("image created to receive content", "volume", name, "bytes", capacityBytes, "allocation", allocation);
        return record;
    }

    @Override
    public ImageRecord receiving(String name) throws IOException {
        return receiving.receiving(name);
    }

    /**
     * The file made again, empty, before the record names the new content: a crash in between
     * leaves the old tag, which a start of the new content empties again (and a resume of the old
     * one fails its digest, DATA_LOSS, and starts over).
     */
    @Override
    public ImageRecord restart(String name, String tag) throws IOException {
        ImageRecord record = receiving.receiving(name);
        files.create(pool.imagePath(name), record.getCapacityBytes(), ImagePool.allocation(record));
        return receiving.restarted(name, tag);
    }

    @Override
    public void receivedUpTo(String name, long receivedBytes) throws IOException {
        receiving.receivedUpTo(name, receivedBytes);
    }

    @Override
    public IncomingContent open(String name) throws IOException {
        ImageRecord record = receiving.receiving(name);
        return new IncomingContent(pool.imagePath(name), record.getCapacityBytes(), false, content::digest, () -> { });
    }

    @Override
    public Image finish(String name, long sourceBytes, String filesystem, boolean usedAsBlock, boolean encrypted) throws IOException {
        return ImagePool.apiImage(receiving.ready(name, sourceBytes, filesystem, usedAsBlock, encrypted), ""); // never attached while receiving
    }

    @Override
    public List<String> names() throws IOException {
        return receiving.names();
    }

    @Override
    public boolean removeIfAbandoned(String name, Duration expiry) throws IOException, DeviceException, MountException {
        return receiving.removeIfAbandoned(name, expiry, pool::delete);
    }
}
