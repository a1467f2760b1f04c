package dev.strata.csi.node.local.image;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.FileDescriptor;
import dev.strata.csi.linux.Kernel.DataRange;
import dev.strata.csi.linux.Kernel.Extent;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.linux.SyscallException;
import dev.strata.csi.node.mount.FilesystemStats;
import dev.strata.csi.node.mount.FilesystemUsage;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import jnr.constants.platform.Errno;

/**
 * Image files made with ftruncate (sparse) and then fallocate(2) (every block reserved at once;
 * it reserves extents without writing them, so even a large image takes seconds at most).
 */
public final class SystemImageFiles implements ImageFiles {

    private final Kernel kernel;
    private final FilesystemStats stats;

    public SystemImageFiles(Kernel kernel, FilesystemStats stats) {
        this.kernel = kernel;
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
            try (FileDescriptor file = kernel.open(image.toString(), Kernel.O_WRONLY | Kernel.O_CLOEXEC)) {
                kernel.fallocate(file, 0, bytes);
                kernel.fsync(file);
            } catch (SyscallException e) {
                Files.deleteIfExists(image);
                throw new IOException("cannot allocate " + image + " in full: " + e.getMessage(), e);
            }
        }
    }

    @Override
    public void grow(Path image, long bytes, Allocation allocation) throws IOException {
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
            if (file.length() < bytes) {
                file.setLength(bytes);
            }
            file.getFD().sync();
        }
        if (allocation == Allocation.FULL) {
            // fallocate of the whole range allocates what is missing, also after a crash half-way.
            try (FileDescriptor file = kernel.open(image.toString(), Kernel.O_WRONLY | Kernel.O_CLOEXEC)) {
                kernel.fallocate(file, 0, Files.size(image));
                kernel.fsync(file);
            } catch (SyscallException e) {
                throw new IOException("cannot allocate " + image + " in full: " + e.getMessage(), e);
            }
        }
    }

    @Override
    public CopyMethod copy(Path source, Path target) throws IOException {
        Files.deleteIfExists(target);
        try (FileDescriptor from = kernel.open(source.toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC);
                FileDescriptor to = kernel.open(target.toString(),
                        Kernel.O_WRONLY | Kernel.O_CREAT | Kernel.O_EXCL | Kernel.O_CLOEXEC | Kernel.O_NOFOLLOW, 0600)) {
            long size = Files.size(source);
            CopyMethod method;
            try {
                kernel.cloneFile(from, to);
                method = CopyMethod.REFLINK;
            } catch (SyscallException e) {
                if (!e.is(Errno.EOPNOTSUPP) && !e.is(Errno.EXDEV) && !e.is(Errno.EINVAL) && !e.is(Errno.ENOTTY)) {
                    throw e;
                }
                // No shared extents here (ext4, xfs without reflink): the data, range by range.
                for (DataRange range : kernel.dataRanges(from, size)) {
                    kernel.copyRange(from, to, range.offset(), range.length());
                }
                method = CopyMethod.SPARSE_COPY;
            }
            kernel.ftruncate(to, size); // a hole at the end is part of the size
            return method;
        } catch (SyscallException e) {
            Files.deleteIfExists(target);
            throw new IOException("cannot copy " + source + " to " + target + ": " + e.getMessage(), e);
        }
    }

    @Override
    public void punchHole(Path image, long offset, long length) throws IOException {
        try (FileDescriptor file = kernel.open(image.toString(), Kernel.O_WRONLY | Kernel.O_CLOEXEC)) {
            try {
                kernel.punchHole(file, offset, length);
            } catch (SyscallException e) {
                if (!e.is(Errno.EOPNOTSUPP)) {
                    throw e;
                }
                try (FileChannel channel = FileChannel.open(image, StandardOpenOption.WRITE)) { // no holes here: zeros written
                    ImageContent.writeZeros(channel, offset, offset + length);
                }
            }
        } catch (SyscallException e) {
            throw new IOException("cannot punch a hole in " + image + ": " + e.getMessage(), e);
        }
    }

    @Override
    public void sync(Path image) throws IOException {
        try (FileDescriptor file = kernel.open(image.toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC)) {
            kernel.fsync(file);
        } catch (SyscallException e) {
            throw new IOException("cannot sync " + image + ": " + e.getMessage(), e);
        }
    }

    @Override
    public List<DataRange> dataRanges(Path image) throws IOException {
        try (FileDescriptor file = kernel.open(image.toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC)) {
            return kernel.dataRanges(file, Files.size(image));
        } catch (SyscallException e) {
            throw new IOException("cannot read the data ranges of " + image + ": " + e.getMessage(), e);
        }
    }

    @Override
    public List<Extent> extents(Path image) throws IOException {
        try (FileDescriptor file = kernel.open(image.toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC)) {
            long size = Files.size(image);
            try {
                return kernel.extents(file, size);
            } catch (SyscallException e) {
                if (e.errno() != Errno.EOPNOTSUPP.intValue()) {
                    throw e;
                }
                // No FIEMAP (tmpfs): the data ranges, at no known place, so that only those are read and compared.
                return kernel.dataRanges(file, size).stream()
                        .map(range -> new Extent(range.offset(), 0, range.length(), Extent.UNKNOWN)).toList();
            }
        } catch (SyscallException e) {
            throw new IOException("cannot read the extents of " + image + ": " + e.getMessage(), e);
        }
    }

    @Override
    public long sizeBytes(Path image) throws IOException {
        return Files.size(image);
    }

    @Override
    public long allocatedBytes(Path image) throws IOException {
        if (!Files.exists(image)) {
            return 0;
        }
        try {
            return kernel.allocatedBlocks(image.toString()) * 512;
        } catch (SyscallException e) {
            throw new IOException(e.getMessage(), e);
        }
    }

    @Override
    public Space space(Path dir) throws IOException {
        FilesystemUsage usage = stats.usage(dir);
        return new Space(usage.totalBytes(), usage.availableBytes());
    }
}
