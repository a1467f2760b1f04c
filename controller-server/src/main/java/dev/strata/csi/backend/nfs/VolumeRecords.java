package dev.strata.csi.backend.nfs;

import com.google.protobuf.TextFormat;
import dev.strata.csi.log.Log;
import dev.strata.csi.nfs.api.NfsVolumeRecord;
import dev.strata.csi.system.DurableFiles;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;

/**
 * The records of an export's volumes, one text file per volume directory in the driver's own
 * directory of the export, named by a hash of the directory's path (which can be longer than a
 * file name may be). Written durably: a crash leaves the old record or the new one.
 */
final class VolumeRecords {

    private static final String SUFFIX = ".record";

    private final Path dir;

    VolumeRecords(Path dir) {
        this.dir = dir;
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

    Optional<NfsVolumeRecord> read(String subDir) throws IOException {
        return readFile(dir.resolve(key(subDir) + SUFFIX));
    }

    void write(String subDir, NfsVolumeRecord record) throws IOException {
        Files.createDirectories(dir);
        DurableFiles.write(dir.resolve(key(subDir) + SUFFIX),
                TextFormat.printer().printToString(record).getBytes(StandardCharsets.UTF_8));
    }

    void delete(String subDir) throws IOException {
        DurableFiles.delete(dir.resolve(key(subDir) + SUFFIX));
    }

    /** Every readable record; one that cannot be parsed is logged and skipped. */
    List<NfsVolumeRecord> all(Log log) throws IOException {
        List<NfsVolumeRecord> records = new ArrayList<>();
        if (!Files.isDirectory(dir)) {
            return records;
        }
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "*" + SUFFIX)) {
            for (Path file : files) {
                try {
                    readFile(file).ifPresent(records::add);
                } catch (TextFormat.ParseException e) {
                    log.error("unreadable NFS volume record; left alone", "file", file, "error", e.getMessage());
                }
            }
        }
        return records;
    }

    private static Optional<NfsVolumeRecord> readFile(Path file) throws IOException {
        try {
            return Optional.of(TextFormat.parse(Files.readString(file, StandardCharsets.UTF_8), NfsVolumeRecord.class));
        } catch (NoSuchFileException e) {
            return Optional.empty();
        }
    }
}
