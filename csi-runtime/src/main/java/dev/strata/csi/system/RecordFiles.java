package dev.strata.csi.system;

import com.google.protobuf.Message;
import com.google.protobuf.TextFormat;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.function.BiConsumer;
import java.util.function.BiFunction;
import java.util.function.ToIntFunction;

/**
 * A backend's on-disk records: one protobuf text-format file per key ({@code <key><suffix>}) in
 * one directory, written durably ({@link DurableFiles}: a crash leaves the old record or the new
 * one). Every record written carries the format's current version; a record of an older version
 * (or none, read as 0) is read as it is, one of a newer release is
 * {@link Unreadable}, like a damaged one, and left alone.
 *
 * @param <M> the record message, defined in the backend's own record proto
 */
public final class RecordFiles<M extends Message> {

    /**
     * How a backend's records are versioned: the message type, the version this release writes,
     * and the record's {@code version} field.
     */
    public record Format<M extends Message>(Class<M> type, int currentVersion, ToIntFunction<M> version,
            BiFunction<M, Integer, M> withVersion) {}

    /** A record that cannot be read: damaged, or written by a newer release. */
    public static final class Unreadable extends IOException {
        Unreadable(String message, Throwable cause) {
            super(message, cause);
        }
    }

    private final Path dir;
    private final String suffix;
    private final Format<M> format;

    public RecordFiles(Path dir, String suffix, Format<M> format) {
        this.dir = dir;
        this.suffix = suffix;
        this.format = format;
    }

    public Optional<M> read(String key) throws IOException {
        return readFile(dir.resolve(key + suffix));
    }

    /** Writes the record, stamped with the current format version; makes the directory if needed. */
    public M write(String key, M record) throws IOException {
        M stamped = format.withVersion().apply(record, format.currentVersion());
        DurableFiles.createDirectories(dir);
        DurableFiles.write(dir.resolve(key + suffix), TextFormat.printer().printToString(stamped).getBytes(StandardCharsets.UTF_8));
        return stamped;
    }

    /** Deletes the record durably; false if there was none. */
    public boolean delete(String key) throws IOException {
        return DurableFiles.delete(dir.resolve(key + suffix));
    }

    /**
     * Every readable record by key; one that cannot be read goes to {@code unreadable} (to be
     * logged and left for a person), never acted on. No directory: no records.
     */
    public Map<String, M> all(BiConsumer<Path, Unreadable> unreadable) throws IOException {
        Map<String, M> records = new LinkedHashMap<>();
        if (!Files.isDirectory(dir)) {
            return records;
        }
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "*" + suffix)) {
            for (Path file : files) {
                String name = file.getFileName().toString();
                try {
                    readFile(file).ifPresent(record -> records.put(name.substring(0, name.length() - suffix.length()), record));
                } catch (Unreadable e) {
                    unreadable.accept(file, e);
                }
            }
        }
        return records;
    }

    /** Removes temporary files a crash left mid-write; the record they were replacing is intact. */
    public int removeTemporaries() throws IOException {
        int removed = 0;
        if (!Files.isDirectory(dir)) {
            return removed;
        }
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir, "*" + suffix + DurableFiles.TEMP_SUFFIX)) {
            for (Path file : files) {
                Files.delete(file);
                removed++;
            }
        }
        return removed;
    }

    private Optional<M> readFile(Path file) throws IOException {
        String text;
        try {
            text = Files.readString(file, StandardCharsets.UTF_8);
        } catch (NoSuchFileException e) {
            return Optional.empty();
        }
        M record;
        try {
            record = TextFormat.parse(text, format.type());
        } catch (TextFormat.ParseException e) {
            throw new Unreadable(file + ": " + e.getMessage(), e);
        }
        int version = format.version().applyAsInt(record);
        if (version > format.currentVersion()) {
            throw new Unreadable(file + " was written in format version " + version + " by a newer release; this one reads up to "
                    + format.currentVersion(), null);
        }
        return Optional.of(record);
    }
}
