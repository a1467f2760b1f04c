package dev.strata.csi.system;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Optional;

/**
 * An advisory lock on a file, held by this process until closed or until it dies: the kernel
 * releases it with the process, so a crash never leaves it stuck. The file itself stays.
 */
public final class ExclusiveLock implements AutoCloseable {

    private final FileChannel channel;
    private final FileLock lock;

    private ExclusiveLock(FileChannel channel, FileLock lock) {
        this.channel = channel;
        this.lock = lock;
    }

    /** The lock, or empty when another process holds it. */
    public static Optional<ExclusiveLock> tryAcquire(Path file) throws IOException {
        FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        try {
            FileLock lock = channel.tryLock();
            if (lock == null) {
                channel.close();
                return Optional.empty();
            }
            return Optional.of(new ExclusiveLock(channel, lock));
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
    }

    /**
     * The lock, waiting while another process holds it (an fcntl lock: also between hosts on an NFS
     * mount with locking). The JVM holds file locks for the whole process, so threads of one
     * process must take turns before they call this.
     */
    public static ExclusiveLock acquire(Path file) throws IOException {
        FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
        try {
            return new ExclusiveLock(channel, channel.lock());
        } catch (IOException | RuntimeException e) {
            channel.close();
            throw e;
        }
    }

    @Override
    public void close() {
        try {
            lock.release();
            channel.close();
        } catch (IOException ignored) {
            // closing the channel releases the lock; nothing else to undo
        }
    }
}
