package dev.strata.csi.node.local.pool;

import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.IoLimits;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.VolumeIoLimits;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.RecordFiles;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The agent's record of each image, {@code <name>.record} beside it (local_record.proto, through
 * {@link RecordFiles}: atomic, durable, versioned). The agent owns the pool (it holds the pool's
 * lock), so after the first full read the records are kept in memory too, and capacity
 * accounting costs no parsing. Both pools keep their volumes' records in one ({@link VolumePool#records()}).
 */
public final class RecordStore {

    static final String SUFFIX = ".record";

    /** Version 1; a record without the field (one written by hand) reads as 0, the same format. */
    static final RecordFiles.Format<ImageRecord> FORMAT = new RecordFiles.Format<>(ImageRecord.class, 1,
            ImageRecord::getVersion, (record, version) -> record.toBuilder().setVersion(version).build());

    private final Path dir;
    private final RecordFiles<ImageRecord> files;
    private final Log log;
    /** Every readable record on disk, once {@link #all()} has loaded them. */
    private final Map<String, ImageRecord> cache = new ConcurrentHashMap<>();
    private volatile boolean loaded;

    RecordStore(Path dir, Log log) {
        this.dir = dir;
        this.files = new RecordFiles<>(dir, SUFFIX, FORMAT);
        this.log = log;
    }

    public Optional<ImageRecord> read(String name) throws IOException {
        if (loaded) {
            return Optional.ofNullable(cache.get(name));
        }
        return files.read(name);
    }

    /** The record of the READY image {@code name}; NOT_FOUND when there is none. */
    public ImageRecord ready(String name) throws IOException {
        return read(name)
                .filter(record -> record.getState() == ImageRecord.State.READY)
                .orElseThrow(() -> CsiException.notFound("volume " + name + " does not exist on this node"));
    }

    void write(ImageRecord record) throws IOException {
        cache.put(record.getName(), files.write(record.getName(), record));
    }

    /** The record written as attached for {@code nodeId}, unless it says so already. */
    ImageRecord attached(ImageRecord record, String nodeId) throws IOException {
        if (record.getAttached() && record.getPublishedNodeIdsList().contains(nodeId)) {
            return record;
        }
        ImageRecord.Builder wanted = record.toBuilder().setAttached(true);
        if (!record.getPublishedNodeIdsList().contains(nodeId)) {
            wanted.addPublishedNodeIds(nodeId);
        }
        ImageRecord written = wanted.build();
        write(written);
        return written;
    }

    /** The record written as detached, {@code nodeId} no longer among its nodes, unless it says so already. */
    void detached(ImageRecord record, String nodeId) throws IOException {
        List<String> published = new ArrayList<>(record.getPublishedNodeIdsList());
        published.remove(nodeId);
        if (record.getAttached() || published.size() != record.getPublishedNodeIdsCount()) {
            write(record.toBuilder().setAttached(false).clearPublishedNodeIds().addAllPublishedNodeIds(published).build());
        }
    }

    /** Remembers that the volume now holds {@code filesystem}: it will never be formatted again. */
    public void recordFilesystem(String name, String filesystem) throws IOException {
        ImageRecord record = ready(name);
        if (!record.getFilesystem().equals(filesystem)) {
            write(record.toBuilder().setFilesystem(filesystem).build());
        }
    }

    /** Remembers that the volume's filesystem fills its device now: a copy from a smaller source, grown at stage. */
    public void recordFilesystemGrown(String name) throws IOException {
        ImageRecord record = ready(name);
        if (record.getGrowFilesystem()) {
            write(record.toBuilder().setGrowFilesystem(false).build());
        }
    }

    /** Remembers that the volume was used as a raw block device: it will never be formatted. */
    public void recordBlockUse(String name) throws IOException {
        ImageRecord record = ready(name);
        if (!record.getUsedAsBlock()) {
            write(record.toBuilder().setUsedAsBlock(true).build());
        }
    }

    /** Remembers the volume's IO limits ({@link VolumeIoLimits}): the desired state a pass after a restart applies again. */
    public void recordIoLimits(String name, IoLimits limits) throws IOException {
        ImageRecord record = ready(name);
        if (!record.getIoLimits().equals(limits)) {
            write(record.toBuilder().setIoLimits(limits).build());
        }
    }

    void delete(String name) throws IOException {
        files.delete(name);
        cache.remove(name);
    }

    /** Every readable record; one that cannot be read is logged and left for a person, never acted on. */
    synchronized List<ImageRecord> all() throws IOException {
        if (!loaded) {
            cache.putAll(files.all((file, e) ->
                    log.error("unreadable image record; its volume is left alone", "file", file, "error", e.getMessage())));
            loaded = true;
        }
        return new ArrayList<>(cache.values());
    }

    /** The image file the record of {@code name} stands beside. */
    Path imagePath(String name) {
        return dir.resolve(name + ImagePool.IMAGE_SUFFIX);
    }

    /** Removes temporary files a crash left mid-write; the record they were replacing is intact. */
    int removeTemporaries() throws IOException {
        return files.removeTemporaries();
    }
}
