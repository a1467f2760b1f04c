package dev.strata.csi.backend.local;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.mount.FilesystemStats;
import dev.strata.csi.mount.FilesystemUsage;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.Commands;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import jnr.posix.POSIX;
import jnr.posix.POSIXFactory;

/** Image files made with truncate (sparse) or fallocate(1) (every block reserved at once). */
public final class SystemImageFiles implements ImageFiles {

    /** fallocate reserves extents without writing them, so even large images take seconds. */
    private static final Duration FALLOCATE_TIMEOUT = Duration.ofMinutes(2);

    private final Commands commands;
    private final FilesystemStats stats;
    private final POSIX posix = POSIXFactory.getNativePOSIX();

    public SystemImageFiles(Commands commands, FilesystemStats stats) {
        this.commands = commands;
        this.stats = stats;
    }

    @Override
    public void create(Path image, long bytes, Allocation allocation) throws IOException {
        Files.deleteIfExists(image);
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
            file.setLength(bytes);
            file.getFD().sync();
        }
        if (allocation == Allocation.FULL) {
            try {
                commands.run(FALLOCATE_TIMEOUT, "fallocate", "--length", Long.toString(bytes), image.toString())
                        .check("fallocate " + image);
            } catch (CommandException e) {
                Files.deleteIfExists(image);
                throw new IOException(e.getMessage(), e);
            }
        }
    }

    @Override
    public long allocatedBytes(Path image) throws IOException {
        if (!Files.exists(image)) {
            return 0;
        }
        // st_blocks counts 512-byte units whatever the filesystem's block size.
        return posix.stat(image.toString()).blocks() * 512;
    }

    @Override
    public Space space(Path dir) throws IOException {
        FilesystemUsage usage = stats.usage(dir);
        return new Space(usage.totalBytes(), usage.availableBytes());
    }
}
