package dev.strata.csi.server;

import dev.strata.csi.system.ExclusiveLock;
import java.io.IOException;
import java.net.ConnectException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;

/**
 * The right to listen on a socket path. A lock file beside the socket serialises servers that
 * start at the same moment; a socket file left by a crashed server is removed, one that a live
 * server answers on is never taken, and a path that is not a socket is never deleted.
 */
final class SocketClaim implements AutoCloseable {

    private static final int S_IFMT = 0170000;
    private static final int S_IFSOCK = 0140000;

    private final Path socket;
    private final ExclusiveLock lock;
    private final boolean removedStale;

    private SocketClaim(Path socket, ExclusiveLock lock, boolean removedStale) {
        this.socket = socket;
        this.lock = lock;
        this.removedStale = removedStale;
    }

    static SocketClaim claim(Path socket) throws StartupException {
        ExclusiveLock lock = null;
        try {
            Files.createDirectories(socket.getParent());
            Path lockFile = socket.resolveSibling(socket.getFileName() + ".lock");
            lock = ExclusiveLock.tryAcquire(lockFile).orElseThrow(() -> new StartupException(
                    "another server holds " + lockFile + "; refusing to take over " + socket));
            boolean removedStale = false;
            if (Files.exists(socket, LinkOption.NOFOLLOW_LINKS)) {
                int mode = (Integer) Files.getAttribute(socket, "unix:mode", LinkOption.NOFOLLOW_LINKS);
                if ((mode & S_IFMT) != S_IFSOCK) {
                    throw new StartupException(socket + " exists and is not a socket; refusing to replace it");
                }
                if (answers(socket)) {
                    throw new StartupException("a live server is listening on " + socket + "; refusing to take it over");
                }
                Files.delete(socket);
                removedStale = true;
            }
            return new SocketClaim(socket, lock, removedStale);
        } catch (IOException e) {
            closeQuietly(lock);
            throw new StartupException("cannot prepare socket " + socket + ": " + e.getMessage(), e);
        } catch (StartupException e) {
            closeQuietly(lock);
            throw e;
        }
    }

    private static boolean answers(Path socket) throws IOException {
        try (SocketChannel probe = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            probe.connect(UnixDomainSocketAddress.of(socket));
            return true;
        } catch (ConnectException e) {
            return false;
        }
    }

    boolean removedStale() {
        return removedStale;
    }

    /** Removes the socket, then gives up the lock; the lock file stays so no other server can be racing on a deleted inode. */
    @Override
    public void close() {
        try {
            Files.deleteIfExists(socket);
        } catch (IOException ignored) {
            // best effort: a leftover socket is detected as stale by the next start
        }
        lock.close();
    }

    private static void closeQuietly(ExclusiveLock lock) {
        if (lock != null) {
            lock.close();
        }
    }
}
