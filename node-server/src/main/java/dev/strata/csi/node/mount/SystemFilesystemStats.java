package dev.strata.csi.node.mount;

import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import jnr.constants.platform.Errno;
import jnr.ffi.LibraryLoader;
import jnr.ffi.NativeType;
import jnr.ffi.Platform;
import jnr.ffi.Runtime;
import jnr.ffi.Struct;
import jnr.ffi.annotations.Out;
import jnr.ffi.annotations.SaveError;

/** {@link FilesystemStats} with statvfs(3) from libc, the call df(1) makes. */
public final class SystemFilesystemStats implements FilesystemStats {

    /** The part of libc this needs; public because jnr-ffi implements it from outside this package. */
    public interface LibC {
        @SaveError
        int statvfs(String path, @Out StatvfsBuffer buffer);
    }

    /**
     * struct statvfs of Linux libc. The count types follow the platform's sizes; the fields after
     * the counts differ between ABIs and are not read, so generous padding covers them all.
     */
    public static final class StatvfsBuffer extends Struct {
        final UnsignedLong blockSize = new UnsignedLong();
        final UnsignedLong fragmentSize = new UnsignedLong();
        final fsblkcnt_t blocks = new fsblkcnt_t();
        final fsblkcnt_t freeBlocks = new fsblkcnt_t();
        final fsblkcnt_t availableBlocks = new fsblkcnt_t();
        final fsfilcnt_t files = new fsfilcnt_t();
        final fsfilcnt_t freeFiles = new fsfilcnt_t();
        final fsfilcnt_t availableFiles = new fsfilcnt_t();
        final Padding rest = new Padding(NativeType.SLONG, 16);

        StatvfsBuffer(Runtime runtime) {
            super(runtime);
        }
    }

    private final LibC libc;
    private final Runtime runtime;

    public SystemFilesystemStats() {
        libc = LibraryLoader.create(LibC.class).load(Platform.getNativePlatform().getStandardCLibraryName());
        runtime = Runtime.getRuntime(libc);
    }

    @Override
    public FilesystemUsage usage(Path path) throws IOException {
        StatvfsBuffer buffer = new StatvfsBuffer(runtime);
        if (libc.statvfs(path.toString(), buffer) != 0) {
            int errno = runtime.getLastError();
            String reason = Errno.valueOf(errno).description();
            switch (Errno.valueOf(errno)) {
                case ENOENT -> throw new NoSuchFileException(path.toString(), null, reason);
                case EACCES -> throw new AccessDeniedException(path.toString(), null, reason);
                default -> throw new IOException(path + ": statvfs: " + reason);
            }
        }
        // Blocks are counted in fragments (f_frsize), as df counts them.
        long unit = buffer.fragmentSize.get() != 0 ? buffer.fragmentSize.get() : buffer.blockSize.get();
        long blocks = buffer.blocks.get();
        long files = buffer.files.get();
        return new FilesystemUsage(
                blocks * unit,
                buffer.availableBlocks.get() * unit,
                (blocks - buffer.freeBlocks.get()) * unit,
                files,
                buffer.freeFiles.get(),
                files - buffer.freeFiles.get());
    }
}
