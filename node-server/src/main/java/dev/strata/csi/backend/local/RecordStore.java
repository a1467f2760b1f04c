package dev.strata.csi.backend.local;

import com.google.protobuf.TextFormat;
import dev.strata.csi.agent.api.ImageRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.system.DurableFiles;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The agent's record of each image, one text-format file beside it. Every write is atomic and
 * durable (write a temporary file, fsync, rename over, fsync the directory): after a crash a
 * record is either the old one or the new one, never half of each. The agent owns the pool (it
 * holds the pool's lock), so after the first full read the records are kept in memory too, and
 * capacity accounting costs no parsing.
 */
final class RecordStore {

    static final String SUFFIX = ".record";

    private final Path dir;
    private final Log log;
    /** Every readable record on disk, once {@link #all()} has loaded them. */
    private final Map<String, ImageRecord> cache = new ConcurrentHashMap<>();
    private volatile boolean loaded;

    RecordStore(Path dir, Log log) {
        this.dir = dir;
        this.log = log;
    }

    Optional<ImageRecord> read(String name) throws IOException {
        if (loaded) {
            return Optional.ofNullable(cache.get(name));
        }
        return readFile(name);
    }

    private Optional<ImageRecord> readFile(String name) throws IOException {
        try {
            String text = Files.readString(dir.resolve(name + SUFFIX), StandardCharsets.UTF_8);
            return Optional.of(TextFormat.parse(text, ImageRecord.class));
        } catch (NoSuchFileException e) {
            return Optional.empty();
        }
    }

    void write(ImageRecord record) throws IOException {
        DurableFiles.write(dir.resolve(record.getName() + SUFFIX),
                TextFormat.printer().printToString(record).getBytes(StandardCharsets.UTF_8));
        cache.put(record.getName(), record);
    }

    void delete(String name) throws IOException {
        DurableFiles.delete(dir.resolve(name + SUFFIX));
        cache.remove(name);
    }

    /** Every readable record; one that cannot be parsed is logged and left for a person, never acted on. */
    synchronized List<ImageRecord> all() throws IOException {
        if (!loaded) {
            try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "*" + SUFFIX)) {
                for (Path file : files) {
                    String fileName = file.getFileName().toString();
                    String name = fileName.substring(0, fileName.length() - SUFFIX.length());
                    try {
                        readFile(name).ifPresent(record -> cache.put(name, record));
                    } catch (TextFormat.ParseException e) {
                        log.error("unreadable image record; its volume is left alone", "file", file, "error", e.getMessage());
                    }
                }
            }
            loaded = true;
        }
        return new ArrayList<>(cache.values());
    }

    /** Removes temporary files a crash left mid-write; the record they were replacing is intact. */
    int removeTemporaries() throws IOException {
        int removed = 0;
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "*" + SUFFIX + DurableFiles.TEMP_SUFFIX)) {
            for (Path file : files) {
                Files.delete(file);
                removed++;
            }
        }
        return removed;
    }
}
