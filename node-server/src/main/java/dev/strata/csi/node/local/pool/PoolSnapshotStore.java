package dev.strata.csi.node.local.pool;

import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.RecordFiles;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The pool's snapshot area: {@code snapshots/<name>.img} with {@code snapshots/<name>.record}
 * (local_record.proto's SnapshotRecord, through {@link RecordFiles}: atomic, durable,
 * versioned). Apart from the images, so a snapshot is never attached, listed as a volume or
 * taken for a stranger's image at start.
 */
final class PoolSnapshotStore {

    static final String DIR = "snapshots";
    static final String SUFFIX = ".record";

    /** Version 1: the first. */
    private static final RecordFiles.Format<SnapshotRecord> FORMAT = new RecordFiles.Format<>(SnapshotRecord.class, 1,
            SnapshotRecord::getVersion, (record, version) -> record.toBuilder().setVersion(version).build());

    private final Path dir;
    private final RecordFiles<SnapshotRecord> records;
    private final Log log;

    PoolSnapshotStore(Path poolDir, Log log) {
        this.dir = poolDir.resolve(DIR);
        this.records = new RecordFiles<>(dir, SUFFIX, FORMAT);
        this.log = log;
    }

    Optional<SnapshotRecord> read(String name) throws IOException {
        return records.read(name);
    }

    /** The READY snapshot {@code name}; NOT_FOUND when there is none. */
    SnapshotRecord ready(String name) throws IOException {
        return read(name)
                .filter(record -> record.getState() == SnapshotRecord.State.READY)
                .orElseThrow(() -> CsiException.notFound("snapshot " + name + " does not exist on this node"));
    }

    /** Writes the record durably; makes the snapshot area if needed. */
    SnapshotRecord write(SnapshotRecord record) throws IOException {
        return records.write(record.getName(), record);
    }

    void delete(String name) throws IOException {
        records.delete(name);
    }

    /** Every readable record; one that cannot be read is logged and left for a person, never acted on. */
    List<SnapshotRecord> all() throws IOException {
        return new ArrayList<>(records.all((file, e) ->
                log.error("unreadable snapshot record; its snapshot is left alone", "file", file, "error", e.getMessage())).values());
    }

    /** Marks the READY members of group {@code group} committed; returns them. */
    List<SnapshotRecord> commit(String group) throws IOException {
        List<SnapshotRecord> members = new ArrayList<>();
        for (SnapshotRecord record : all()) {
            if (record.getState() == SnapshotRecord.State.READY && record.getGroup().getName().equals(group)) {
                members.add(record.getGroup().getCommitted() ? record
                        : write(record.toBuilder().setGroup(record.getGroup().toBuilder().setCommitted(true)).build()));
            }
        }
        return members;
    }

    /** A member of a group snapshot whose cut never completed: removed at start, as a temporary snapshot is. */
    static boolean uncommitted(SnapshotRecord record) {
        return record.hasGroup() && !record.getGroup().getCommitted();
    }

    /** ALREADY_EXISTS unless the existing snapshot {@code record} is what a take of it asks for: the same source, the same group or none. */
    static void requireSame(SnapshotRecord record, String sourceImage, String group) {
        if (!record.getOriginNode().isEmpty()) {
            throw CsiException.alreadyExists("snapshot " + record.getName() + " is a copy of node " + record.getOriginNode() + "'s");
        }
        if (!record.getSourceVolume().equals(sourceImage)) {
            throw CsiException.alreadyExists("snapshot " + record.getName() + " exists of volume " + record.getSourceVolume()
                    + "; asked for one of " + sourceImage);
        }
        if (!record.getGroup().getName().equals(group)) {
            throw CsiException.alreadyExists("snapshot " + record.getName() + (record.hasGroup() ? " is a member of group snapshot "
                    + record.getGroup().getName() : " is no group snapshot's member") + (group.isEmpty() ? "" : "; asked for one of " + group));
        }
    }

    int removeTemporaries() throws IOException {
        return records.removeTemporaries();
    }

    Path imagePath(String name) {
        return dir.resolve(name + ImagePool.IMAGE_SUFFIX);
    }
}
