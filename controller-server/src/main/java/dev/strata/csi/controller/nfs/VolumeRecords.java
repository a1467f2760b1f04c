package dev.strata.csi.controller.nfs;

import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.system.RecordFiles;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;

/**
 * The records of an export's volumes (nfs_record.proto, through {@link RecordFiles}: atomic,
 * durable, versioned), one file per volume directory in the driver's own directory of the
 * export, named by a hash of the directory's path (which can be longer than a file name may be).
 */
final class VolumeRecords {

    private static final String SUFFIX = ".record";

    /** Version 1; a record without the field (one written by hand) reads as 0, the same format. */
    static final RecordFiles.Format<NfsVolumeRecord> FORMAT = new RecordFiles.Format<>(NfsVolumeRecord.class, 1,
            NfsVolumeRecord::getVersion, (record, version) -> record.toBuilder().setVersion(version).build());

    private final RecordFiles<NfsVolumeRecord> files;

    VolumeRecords(Path dir) {
        this.files = new RecordFiles<>(dir, SUFFIX, FORMAT);
    }

    /** The key of a volume directory: also the name of its record and of its trash entry. */
    static String key(String subDir) {
        try {
            byte[] hash = MessageDigest.getInstance("SHA-256").digest(subDir.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(hash, 0, 20);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java runtime has SHA-256", e);
        }
    }

    /** Whether {@code name} has the form of a {@link #key}: 40 lower-case hex digits. */
    static boolean isKey(String name) {
        return name.length() == 40 && name.chars().allMatch(c -> (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    }

    Optional<NfsVolumeRecord> read(String subDir) throws IOException {
        return files.read(key(subDir));
    }

    /** The record in {@code subDir} if it is the volume {@code volumeId}'s: a record of another id is another volume's since. */
    Optional<NfsVolumeRecord> readOf(String subDir, String volumeId) throws IOException {
        return read(subDir).filter(found -> found.getVolumeId().equals(volumeId));
    }

    /**
     * Whether the record in {@code subDir} is still {@code record}'s volume, checked under the
     * record's lock before a directory is made or placed for it: a DeleteVolume can come between
     * (another replica's), and the directory would then belong to no volume.
     */
    boolean holds(String subDir, NfsVolumeRecord record) throws IOException {
        return readOf(subDir, record.getVolumeId()).isPresent();
    }

    void write(String subDir, NfsVolumeRecord record) throws IOException {
        files.write(key(subDir), record);
    }

    void delete(String subDir) throws IOException {
        files.delete(key(subDir));
    }

    /** Every readable record; one that cannot be read is logged and skipped. */
    List<NfsVolumeRecord> all(Log log) throws IOException {
        return new ArrayList<>(files.all((file, e) ->
                log.error("unreadable NFS volume record; left alone", "file", file, "error", e.getMessage())).values());
    }
}
