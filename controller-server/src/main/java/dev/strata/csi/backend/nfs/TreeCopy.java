package dev.strata.csi.backend.nfs;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.SeekableByteChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SecureDirectoryStream;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributeView;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFileAttributes;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

/**
 * Copies a directory tree that pods write (a volume's directory, or a snapshot of one) into a new
 * directory of the driver's, which no pod reaches. The source is read through directory file
 * descriptors ({@link SecureDirectoryStream}: openat(2) with O_NOFOLLOW), so a symbolic link a pod
 * puts in the way, even while the copy runs, is copied as a link and never followed: nothing from
 * outside the source reaches the copy. File contents go through copy_file_range(2)
 * ({@link FileChannel#transferTo}), which the kernel turns into a reflink where the filesystem can
 * (btrfs, xfs with reflink, NFSv4.2 to a server whose filesystem can) and into an in-kernel or
 * server-side copy elsewhere; each file is flushed before the next.
 *
 * <p>Kept: directories, regular files (their bytes: holes are filled), symbolic links, hard links
 * within the tree, owner and group, the mode with its setuid, setgid and sticky bits, modification
 * and access times. Not kept: FIFOs, sockets and device nodes (counted as skipped), extended
 * attributes and ACLs.
 */
final class TreeCopy {

    /** What a copy held: the bytes of its regular files, the entries copied and the entries skipped. */
    record Result(long bytes, long entries, long skipped) {}

    private final Map<Object, Path> linked = new HashMap<>();
    private long bytes;
    private long entries;
    private long skipped;

    private TreeCopy() {}

    /** Copies the tree at {@code source} (a directory, reached without links) to {@code target}, which must not exist. */
    static Result copy(Path source, Path target) throws IOException {
        TreeCopy copy = new TreeCopy();
        PosixFileAttributes attributes = Files.readAttributes(source, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        if (!attributes.isDirectory()) {
            throw new IOException(source + " is not a directory");
        }
        try (DirectoryStream<Path> stream = Files.newDirectoryStream(source)) {
            if (!(stream instanceof SecureDirectoryStream<Path> secure)) {
                throw new IOException("this platform reads no directory by file descriptor; the copy of " + source
                        + " would follow links pods place");
            }
            Files.createDirectory(target);
            copy.directory(secure, target);
        }
        copy.keep(source, attributes, target);
        return new Result(copy.bytes, copy.entries, copy.skipped);
    }

    /**
     * The bytes of the regular files under {@code tree}, read as {@link #copy} reads (a link is never
     * followed); a file with several hard links counts at each of its names, so this is an upper bound.
     */
    static long bytes(Path tree) throws IOException {
        try (DirectoryStream<Path> stream = Files.newDirectoryStream(tree)) {
            if (!(stream instanceof SecureDirectoryStream<Path> secure)) {
                throw new IOException("this platform reads no directory by file descriptor");
            }
            return bytes(secure);
        }
    }

    private static long bytes(SecureDirectoryStream<Path> dir) throws IOException {
        long total = 0;
        for (Path entry : dir) {
            Path name = entry.getFileName();
            BasicFileAttributes attributes = dir.getFileAttributeView(name, BasicFileAttributeView.class, LinkOption.NOFOLLOW_LINKS)
                    .readAttributes();
            if (attributes.isDirectory()) {
                try (SecureDirectoryStream<Path> sub = dir.newDirectoryStream(name, LinkOption.NOFOLLOW_LINKS)) {
                    total += bytes(sub);
                }
            } else if (attributes.isRegularFile()) {
                total += attributes.size();
            }
        }
        return total;
    }

    /** Removes a tree of the driver's own; links are removed, never followed; nothing there is fine. */
    static void remove(Path tree) throws IOException {
        if (!Files.exists(tree, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        Files.walkFileTree(tree, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attributes) throws IOException {
                Files.deleteIfExists(file);
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException e) throws IOException {
                if (e instanceof NoSuchFileException) {
                    return FileVisitResult.CONTINUE;
                }
                throw e;
            }

            @Override
            public FileVisitResult postVisitDirectory(Path directory, IOException e) throws IOException {
                if (e != null && !(e instanceof NoSuchFileException)) {
                    throw e;
                }
                Files.deleteIfExists(directory);
                return FileVisitResult.CONTINUE;
            }
        });
    }

    private void directory(SecureDirectoryStream<Path> dir, Path target) throws IOException {
        for (Path entry : dir) {
            Path name = entry.getFileName();
            PosixFileAttributes attributes = dir.getFileAttributeView(name, PosixFileAttributeView.class, LinkOption.NOFOLLOW_LINKS)
                    .readAttributes();
            Path to = target.resolve(name.toString());
            if (attributes.isDirectory()) {
                // Opened with O_NOFOLLOW: a directory a pod swapped for a link since fails the copy, never leads out.
                try (SecureDirectoryStream<Path> sub = dir.newDirectoryStream(name, LinkOption.NOFOLLOW_LINKS)) {
                    Files.createDirectory(to);
                    directory(sub, to);
                }
            } else if (attributes.isRegularFile()) {
                if (!file(dir, name, entry, attributes, to)) {
                    entries++;
                    continue; // a further link to a file copied already: it has that file's attributes
                }
            } else if (attributes.isSymbolicLink()) {
                // Only the link's text is read by path; the link is made, never followed.
                Files.createSymbolicLink(to, Files.readSymbolicLink(entry));
            } else {
                skipped++;
                continue;
            }
            keep(entry, attributes, to);
            entries++;
        }
    }

    /** Copies a regular file, or links it to the copy of a file already copied; false for a link. */
    private boolean file(SecureDirectoryStream<Path> dir, Path name, Path entry, PosixFileAttributes attributes, Path to)
            throws IOException {
        Object key = attributes.fileKey();
        boolean shared = key != null && unix(entry, key).map(unix -> ((Number) unix.get("nlink")).intValue() > 1).orElse(false);
        if (shared && linked.containsKey(key)) {
            Files.createLink(to, linked.get(key));
            return false;
        }
        try (SeekableByteChannel in = dir.newByteChannel(name, Set.of(StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS));
                FileChannel out = FileChannel.open(to, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            bytes += in instanceof FileChannel channel ? transfer(channel, out) : copy(in, out);
            out.force(true);
        }
        if (shared) {
            linked.put(key, to);
        }
        return true;
    }

    private static long transfer(FileChannel in, FileChannel out) throws IOException {
        long size = in.size();
        long done = 0;
        while (done < size) {
            long moved = in.transferTo(done, size - done, out);
            if (moved <= 0) {
                break; // the file shrank meanwhile: a pod writes it
            }
            done += moved;
        }
        return done;
    }

    private static long copy(SeekableByteChannel in, FileChannel out) throws IOException {
        ByteBuffer buffer = ByteBuffer.allocate(1 << 20);
        long done = 0;
        while (in.read(buffer) >= 0) {
            buffer.flip();
            while (buffer.hasRemaining()) {
                done += out.write(buffer);
            }
            buffer.clear();
        }
        return done;
    }

    /**
     * Owner, group, mode and times onto the copy. The mode's setuid, setgid and sticky bits and
     * the link count are read by path, and used only when that path still names the file read
     * through the directory descriptor; otherwise the permission bits read there are taken.
     */
    private void keep(Path entry, PosixFileAttributes attributes, Path to) throws IOException {
        PosixFileAttributeView view = Files.getFileAttributeView(to, PosixFileAttributeView.class, LinkOption.NOFOLLOW_LINKS);
        view.setOwner(attributes.owner());
        view.setGroup(attributes.group());
        if (!attributes.isSymbolicLink()) { // a link has no mode of its own on Linux
            var mode = attributes.fileKey() == null ? java.util.Optional.<Map<String, Object>>empty() : unix(entry, attributes.fileKey());
            if (mode.isPresent()) {
                Files.setAttribute(to, "unix:mode", ((Number) mode.get().get("mode")).intValue() & 07777, LinkOption.NOFOLLOW_LINKS);
            } else {
                Files.setPosixFilePermissions(to, attributes.permissions());
            }
        }
        try {
            Files.getFileAttributeView(to, BasicFileAttributeView.class, LinkOption.NOFOLLOW_LINKS)
                    .setTimes(attributes.lastModifiedTime(), attributes.lastAccessTime(), null);
        } catch (UnsupportedOperationException e) {
            // a platform that cannot set a link's own times: the link keeps the time it was made
        }
    }

    private static java.util.Optional<Map<String, Object>> unix(Path entry, Object key) throws IOException {
        Map<String, Object> unix;
        try {
            unix = Files.readAttributes(entry, "unix:mode,nlink,fileKey", LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            return java.util.Optional.empty();
        }
        return key.equals(unix.get("fileKey")) ? java.util.Optional.of(unix) : java.util.Optional.empty();
    }
}
