package dev.strata.csi.controller.nfs;

import dev.strata.csi.linux.FileDescriptor;
import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.linux.SyscallException;
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
import java.util.Optional;
import java.util.Set;
import jnr.constants.platform.Errno;

/**
 * Copies a directory tree that pods write (a volume's directory, or a snapshot of one) into a new
 * directory of the driver's, which no pod reaches. The source is read through directory file
 * descriptors ({@link SecureDirectoryStream}: openat(2) with O_NOFOLLOW), so a symbolic link a pod
 * puts in the way, even while the copy runs, is copied as a link and never followed: nothing from
 * outside the source reaches the copy. A file or directory is opened itself only once its path is
 * shown to name the very file the directory descriptor read ({@link #reopen}). File contents go
 * through copy_file_range(2), range of data by range (lseek SEEK_DATA and SEEK_HOLE), which the
 * kernel turns into a reflink where the filesystem can (btrfs, xfs with reflink, NFSv4.2 to a
 * server whose filesystem can) and into an in-kernel or server-side copy elsewhere; each file is
 * flushed before the next.
 *
 * <p>Kept: directories, regular files with their holes, symbolic links, hard links within the
 * tree, owner and group, the mode with its setuid, setgid and sticky bits, modification and access
 * times, and the extended attributes of files and directories, ACLs among them (POSIX ACLs are
 * system.posix_acl_*, NFSv4 ACLs system.nfs4_acl); one the copy's filesystem refuses is counted,
 * not copied. Not kept: FIFOs, sockets and device nodes (counted as skipped), the extended
 * attributes of symbolic links. A file whose path names another file by the time it is opened (a
 * pod renames in the tree meanwhile) is still copied, through the directory descriptor, with its
 * holes filled and without its extended attributes.
 */
final class TreeCopy {

    /**
     * What a copy held: the bytes of data of its regular files (holes left out), the entries copied,
     * the entries skipped, and the extended attributes the copy's filesystem refused.
     */
    record Result(long bytes, long entries, long skipped, long attributesRefused) {}

    /** O_PATH (fcntl.h, the same on every architecture this driver runs on): a descriptor that opens nothing. */
    private static final int O_PATH = 010000000;

    private final Kernel kernel;
    private final Map<Object, Path> linked = new HashMap<>();
    private long bytes;
    private long entries;
    private long skipped;
    private long attributesRefused;

    private TreeCopy(Kernel kernel) {
        this.kernel = kernel;
    }

    /** Copies the tree at {@code source} (a directory, reached without links) to {@code target}, which must not exist. */
    static Result copy(Kernel kernel, Path source, Path target) throws IOException {
        TreeCopy copy = new TreeCopy(kernel);
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
        copy.keepDirectory(source, attributes, target);
        return new Result(copy.bytes, copy.entries, copy.skipped, copy.attributesRefused);
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
                keepDirectory(entry, attributes, to);
            } else if (attributes.isRegularFile()) {
                file(dir, name, entry, attributes, to);
            } else if (attributes.isSymbolicLink()) {
                // Only the link's text is read by path; the link is made, never followed.
                Files.createSymbolicLink(to, Files.readSymbolicLink(entry));
                keep(attributes, Optional.empty(), to);
            } else {
                skipped++;
                continue;
            }
            entries++;
        }
    }

    /** A directory's owner, mode and times, then its extended attributes (a default ACL among them). */
    private void keepDirectory(Path entry, PosixFileAttributes attributes, Path to) throws IOException {
        Optional<Map<String, Object>> stat = stat(entry, attributes.fileKey());
        keep(attributes, stat, to);
        Optional<FileDescriptor> source = reopen(entry, stat, Kernel.O_RDONLY | Kernel.O_DIRECTORY);
        if (source.isEmpty()) {
            return;
        }
        try (FileDescriptor from = source.get();
                FileDescriptor copy = kernel.open(to.toString(), Kernel.O_RDONLY | Kernel.O_DIRECTORY | Kernel.O_NOFOLLOW | Kernel.O_CLOEXEC)) {
            extendedAttributes(from, copy);
        } catch (SyscallException e) {
            throw new IOException(e.getMessage(), e);
        }
    }

    /**
     * Copies a regular file with its attributes, or links it to the copy of a file already copied
     * (which has them already). Owner and mode go before the extended attributes, since a change of
     * owner clears security.capability.
     */
    private void file(SecureDirectoryStream<Path> dir, Path name, Path entry, PosixFileAttributes attributes, Path to)
            throws IOException {
        Object key = attributes.fileKey();
        Optional<Map<String, Object>> stat = stat(entry, key);
        boolean shared = stat.map(unix -> ((Number) unix.get("nlink")).intValue() > 1).orElse(false);
        if (shared && linked.containsKey(key)) {
            Files.createLink(to, linked.get(key));
            return;
        }
        Optional<FileDescriptor> source = reopen(entry, stat, Kernel.O_RDONLY);
        if (source.isPresent()) {
            try (FileDescriptor from = source.get();
                    FileDescriptor copy = kernel.open(to.toString(),
                            Kernel.O_WRONLY | Kernel.O_CREAT | Kernel.O_EXCL | Kernel.O_NOFOLLOW | Kernel.O_CLOEXEC, 0600)) {
                bytes += data(from, copy, attributes.size());
                kernel.fsync(copy);
                keep(attributes, stat, to);
                extendedAttributes(from, copy);
            } catch (SyscallException e) {
                throw new IOException(e.getMessage(), e);
            }
        } else {
            try (SeekableByteChannel in = dir.newByteChannel(name, Set.of(StandardOpenOption.READ, LinkOption.NOFOLLOW_LINKS));
                    FileChannel out = FileChannel.open(to, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                bytes += copy(in, out);
                out.force(true);
            }
            keep(attributes, stat, to);
        }
        if (shared) {
            linked.put(key, to);
        }
    }

    /**
     * The file's ranges of data, its holes left holes, up to {@code size} or where the file ends
     * now (a pod may shorten it meanwhile); the copy gets that size. Returns the bytes of data. The
     * channels reach the two files through their descriptors: transferTo is copy_file_range where
     * the kernel can, and reads and writes where it cannot.
     */
    private long data(FileDescriptor from, FileDescriptor copy, long size) throws IOException, SyscallException {
        long copied = 0;
        long end = size;
        try (FileChannel in = FileChannel.open(descriptorPath(from), StandardOpenOption.READ);
                FileChannel out = FileChannel.open(descriptorPath(copy), StandardOpenOption.WRITE)) {
            ranges:
            for (Kernel.DataRange range : kernel.dataRanges(from, size)) {
                long offset = range.offset();
                long last = offset + range.length();
                while (offset < last) {
                    long moved = in.transferTo(offset, last - offset, out.position(offset));
                    if (moved <= 0) {
                        end = offset; // the file ends sooner now
                        break ranges;
                    }
                    offset += moved;
                    copied += moved;
                }
            }
        }
        kernel.ftruncate(copy, end);
        return copied;
    }

    /** The file an open descriptor names, whatever path leads to it now. */
    private static Path descriptorPath(FileDescriptor fd) {
        return Path.of("/proc/self/fd/" + fd.number());
    }

    /** Every extended attribute {@code from} has, onto {@code copy}; one that cannot be read or set is counted, not copied. */
    private void extendedAttributes(FileDescriptor from, FileDescriptor copy) throws SyscallException {
        for (String name : kernel.xattrNames(from)) {
            try {
                Optional<byte[]> value = kernel.xattr(from, name);
                if (value.isPresent()) {
                    kernel.setXattr(copy, name, value.get());
                }
            } catch (SyscallException e) {
                attributesRefused++; // not supported there (EOPNOTSUPP), not allowed (trusted.*: EPERM), or too large
            }
        }
    }

    /**
     * The file the directory descriptor read as {@code entry}, opened with {@code flags}, or empty
     * when its path names another file by now ({@code stat} is empty then, or the path changed
     * since). The path is opened with O_PATH first, which opens nothing (no device node acts, no
     * FIFO blocks), and its identity checked against {@code stat}; only then is the file opened,
     * through /proc/self/fd, which names that file and no path a pod can change.
     */
    private Optional<FileDescriptor> reopen(Path entry, Optional<Map<String, Object>> stat, int flags) throws IOException {
        if (stat.isEmpty()) {
            return Optional.empty();
        }
        FileIdentity read = new FileIdentity(FileIdentity.decode((Long) stat.get().get("dev")), (Long) stat.get().get("ino"));
        try (FileDescriptor path = kernel.open(entry.toString(), O_PATH | Kernel.O_NOFOLLOW | Kernel.O_CLOEXEC)) {
            if (!kernel.identity(path).equals(read)) {
                return Optional.empty();
            }
            return Optional.of(kernel.open(descriptorPath(path).toString(), flags | Kernel.O_CLOEXEC));
        } catch (SyscallException e) {
            if (e.is(Errno.ENOENT)) {
                return Optional.empty(); // removed since it was read
            }
            throw new IOException(e.getMessage(), e);
        }
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
     * Owner, group, mode and times onto the copy. The mode's setuid, setgid and sticky bits come
     * from {@code stat}, read by path; without it the permission bits the directory descriptor read
     * are taken.
     */
    private void keep(PosixFileAttributes attributes, Optional<Map<String, Object>> stat, Path to) throws IOException {
        PosixFileAttributeView view = Files.getFileAttributeView(to, PosixFileAttributeView.class, LinkOption.NOFOLLOW_LINKS);
        view.setOwner(attributes.owner());
        view.setGroup(attributes.group());
        if (!attributes.isSymbolicLink()) { // a link has no mode of its own on Linux
            if (stat.isPresent()) {
                Files.setAttribute(to, "unix:mode", ((Number) stat.get().get("mode")).intValue() & 07777, LinkOption.NOFOLLOW_LINKS);
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

    /**
     * What stat(2) by path says of {@code entry} (mode, link count, device and inode), when that
     * path still names the file the directory descriptor read as {@code key}; empty otherwise.
     * The descriptor gives neither the mode's special bits nor the numbers that identify the file.
     */
    private static Optional<Map<String, Object>> stat(Path entry, Object key) throws IOException {
        if (key == null) {
            return Optional.empty();
        }
        Map<String, Object> unix;
        try {
            unix = Files.readAttributes(entry, "unix:mode,nlink,dev,ino,fileKey", LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            return Optional.empty();
        }
        return key.equals(unix.get("fileKey")) ? Optional.of(unix) : Optional.empty();
    }
}
