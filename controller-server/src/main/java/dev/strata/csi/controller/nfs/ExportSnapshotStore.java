package dev.strata.csi.controller.nfs;

import dev.strata.csi.backend.nfs.records.NfsSnapshotRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.system.RecordFiles;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * An export's snapshots, in its driver directory ({@code .strata-csi/snapshots/}), each under the
 * key of its name (a hash, as a volume's record is named): {@code <key>.record} (nfs_record.proto's
 * NfsSnapshotRecord, through {@link RecordFiles}), the copy {@code <key>/}, the copy being made
 * {@code <key>.partial/}, and {@code <key>.lock} while a call works on it.
 */
final class ExportSnapshotStore {

    static final RecordFiles.Format<NfsSnapshotRecord> FORMAT = new RecordFiles.Format<>(NfsSnapshotRecord.class, 1,
            NfsSnapshotRecord::getVersion, (record, version) -> record.toBuilder().setVersion(version).build());

    private final Path dir;
    private final RecordFiles<NfsSnapshotRecord> records;

    ExportSnapshotStore(Path dir) {
        this.dir = dir;
        this.records = new RecordFiles<>(dir, ".record", FORMAT);
    }

    Path dir() {
        return dir;
    }

    Optional<NfsSnapshotRecord> read(String name) throws IOException {
        return records.read(VolumeRecords.key(name));
    }

    void write(String name, NfsSnapshotRecord record) throws IOException {
        records.write(VolumeRecords.key(name), record);
    }

    void delete(String name) throws IOException {
        records.delete(VolumeRecords.key(name));
    }

    /** Every readable record; one that cannot be read is logged and skipped. */
    List<NfsSnapshotRecord> all(Log log) throws IOException {
        return new ArrayList<>(records.all((file, e) ->
                log.error("unreadable NFS snapshot record; left alone", "file", file, "error", e.getMessage())).values());
    }

    /** The complete copy. */
    Path data(String name) {
        return dir.resolve(VolumeRecords.key(name));
    }

    /** The copy being made; renamed to {@link #data} once complete. */
    Path partial(String name) {
        return dir.resolve(VolumeRecords.key(name) + ".partial");
    }

    Path lock(String name) {
        return dir.resolve(VolumeRecords.key(name) + ".lock");
    }
}
