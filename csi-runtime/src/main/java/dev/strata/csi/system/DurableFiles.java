package dev.strata.csi.system;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

/**
 * Files written so that a crash leaves the old content or the new, never half of each: write a
 * temporary file beside the target, fsync it, rename it over the target, fsync the directory.
 */
public final class DurableFiles {

    public static final String TEMP_SUFFIX = ".tmp";

    private DurableFiles() {}

    public static void write(Path target, byte[] bytes) throws IOException {
        Path temp = target.resolveSibling(target.getFileName() + TEMP_SUFFIX);
        try (FileChannel out = FileChannel.open(temp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ByteBuffer buffer = ByteBuffer.wrap(bytes);
            while (buffer.hasRemaining()) {
                out.write(buffer);
            }
            out.force(true);
        }
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        syncDirectory(target.getParent());
    }

    /** Deletes {@code file} durably; false if it was not there. */
    public static boolean delete(Path file) throws IOException {
        if (!Files.deleteIfExists(file)) {
            return false;
        }
        syncDirectory(file.getParent());
        return true;
    }

    /**
     * Makes {@code dir} and any missing parent, each new directory's entry synced in its parent:
     * a file written durably into a directory made a moment before is otherwise lost with that
     * directory when the machine crashes before the parent's entry reaches the disk.
     */
    public static void createDirectories(Path dir) throws IOException {
        if (Files.isDirectory(dir)) {
            return;
        }
        Path parent = dir.toAbsolutePath().getParent();
        createDirectories(parent);
        try {
            Files.createDirectory(dir);
        } catch (FileAlreadyExistsException e) {
            if (!Files.isDirectory(dir)) {
                throw e;
            }
            // made meanwhile by another thread, which may not have synced the parent yet
        }
        syncDirectory(parent);
    }

    /** Makes a rename, create or delete in {@code dir} durable. */
    public static void syncDirectory(Path dir) throws IOException {
        try (FileChannel directory = FileChannel.open(dir, StandardOpenOption.READ)) {
            directory.force(true);
        }
    }
}
