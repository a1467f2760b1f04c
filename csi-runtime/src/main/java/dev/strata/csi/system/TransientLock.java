package dev.strata.csi.system;

import dev.strata.csi.linux.FileDescriptor;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.linux.SyscallException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.locks.LockSupport;
import jnr.constants.platform.Errno;

/**
 * An exclusive lock on a file that exists only while the lock is held: taking it makes the file,
 * letting it go removes it, so no lock file outlives its work. It is a flock(2) lock, held by the
 * open file (so threads of one process exclude each other too) and dropped by the kernel with a
 * process that dies; on NFS it is a lock at the server, so it holds between hosts.
 *
 * <p>Removing a lock file others may wait on is safe only with a check: a taker that opened the
 * file before its holder removed it gets the lock on the removed file, while a third makes a new
 * file and locks that one. So a taker, once it holds the lock, checks that the path still names the
 * file it locked (same device and inode), and otherwise lets go and tries the file there now.
 */
public final class TransientLock implements AutoCloseable {

    private static final int OPEN_FLAGS = Kernel.O_RDWR | Kernel.O_CREAT | Kernel.O_NOFOLLOW | Kernel.O_CLOEXEC;
    private static final Duration LONGEST_PAUSE = Duration.ofMillis(50);

    private final Path file;
    private final FileDescriptor descriptor;
    private boolean closed;

    private TransientLock(Path file, FileDescriptor descriptor) {
        this.file = file;
        this.descriptor = descriptor;
    }

    /** The lock, or empty when another holds it. The file's directory must exist. */
    public static Optional<TransientLock> tryAcquire(Kernel kernel, Path file) throws IOException {
        while (true) {
            FileDescriptor descriptor = open(kernel, file);
            boolean keep = false;
            try {
                boolean locked = kernel.tryLockExclusive(descriptor);
                if (names(kernel, file, descriptor)) {
                    keep = locked;
                    return locked ? Optional.of(new TransientLock(file, descriptor)) : Optional.empty();
                }
                // Its holder removed the file since we opened it (and may have let go): try the one there now.
            } catch (SyscallException e) {
                if (!e.is(Errno.ESTALE)) { // ESTALE: removed at the NFS server since we opened it, as above
                    throw new IOException(e.getMessage(), e);
                }
            } finally {
                if (!keep) {
                    descriptor.close();
                }
            }
            LockSupport.parkNanos(1_000_000); // let the holder that removed it finish letting go
        }
    }

    /**
     * The lock, waiting up to {@code wait} while another holds it (polling, for a lock held for
     * moments); empty when it is still held then.
     */
    public static Optional<TransientLock> acquire(Kernel kernel, Path file, Duration wait) throws IOException, InterruptedException {
        long end = System.nanoTime() + wait.toNanos();
        long pause = 1;
        while (true) {
            Optional<TransientLock> held = tryAcquire(kernel, file);
            if (held.isPresent() || System.nanoTime() - end >= 0) {
                return held;
            }
            Thread.sleep(Math.min(pause, Math.max(1, (end - System.nanoTime()) / 1_000_000)));
            pause = Math.min(pause * 2, LONGEST_PAUSE.toMillis());
        }
    }

    /** Removes the file, then lets go: the order that needs the takers' check above. Once only: the path may name another's lock file after. */
    @Override
    public void close() throws IOException {
        if (closed) {
            return;
        }
        closed = true;
        try {
            Files.deleteIfExists(file);
        } finally {
            descriptor.close();
        }
    }

    private static FileDescriptor open(Kernel kernel, Path file) throws IOException {
        try {
            return kernel.open(file.toString(), OPEN_FLAGS, 0600);
        } catch (SyscallException e) {
            if (e.is(Errno.ENOENT)) {
                throw new NoSuchFileException(file.toString(), null, e.getMessage());
            }
            throw new IOException(e.getMessage(), e);
        }
    }

    /**
     * Whether {@code file} names the file the descriptor is open on. The name is opened afresh, not
     * looked up with stat: over NFS an open asks the server what the name means now (close-to-open),
     * where a stat may answer from the client's cache. Closing that second descriptor leaves the
     * flock lock alone, which belongs to the first.
     */
    private static boolean names(Kernel kernel, Path file, FileDescriptor descriptor) throws IOException, SyscallException {
        FileDescriptor named;
        try {
            named = kernel.open(file.toString(), Kernel.O_RDONLY | Kernel.O_NOFOLLOW | Kernel.O_CLOEXEC);
        } catch (SyscallException e) {
            if (e.is(Errno.ENOENT) || e.is(Errno.ESTALE)) {
                return false;
            }
            throw new IOException(e.getMessage(), e);
        }
        try (named) {
            // ESTALE here (the locked file removed at the NFS server) goes to the caller, which tries again.
            return kernel.identity(descriptor).equals(kernel.identity(named));
        }
    }
}
