package dev.strata.csi.backend.nfs;

import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.ExclusiveLock;
import java.io.IOException;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * Held while a call copies into, or removes, a snapshot or a restored volume's copy. A copy can
 * outlast its call (the call answers at --nfs-timeout, the copy goes on), so the retry, or another
 * controller replica, finds the lock held and answers ABORTED instead of copying over it; the kernel
 * drops the lock with a process that dies, and the next call takes it and starts afresh. The file is
 * removed before the lock is let go, so no lock file outlives the work.
 */
final class CopyLock implements AutoCloseable {

    private final Path file;
    private final ExclusiveLock lock;

    private CopyLock(Path file, ExclusiveLock lock) {
        this.file = file;
        this.lock = lock;
    }

    /** The lock, or ABORTED naming {@code what} while another call or replica holds it. */
    static CopyLock take(Path file, String what) throws IOException {
        Files.createDirectories(file.getParent());
        Optional<ExclusiveLock> held;
        try {
            held = ExclusiveLock.tryAcquire(file);
        } catch (OverlappingFileLockException e) { // held by another thread of this process
            held = Optional.empty();
        }
        return new CopyLock(file, held.orElseThrow(() -> CsiException.aborted(what
                + " is being worked on by an earlier call that is still copying or removing; retry later")));
    }

    @Override
    public void close() throws IOException {
        try {
            Files.deleteIfExists(file);
        } finally {
            lock.close();
        }
    }
}
