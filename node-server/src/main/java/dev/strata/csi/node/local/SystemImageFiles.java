package dev.strata.csi.node.local;

import com.sun.nio.file.ExtendedOpenOption;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.FileDescriptor;
import dev.strata.csi.linux.Kernel.DataRange;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.linux.SyscallException;
import dev.strata.csi.node.mount.FilesystemStats;
import dev.strata.csi.node.mount.FilesystemUsage;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import jnr.constants.platform.Errno;

/**
 * Image files made with ftruncate (sparse), and for full allocation fallocate(2) (every block
 * reserved at once, so that a pool without room fails at once) and then zeros written over the
 * whole file: fallocate leaves unwritten extents, and each first write into one costs the pool's
 * filesystem an extent conversion in its journal, which halved a new volume's random writes in
 * hack/datapath-vm.sh. Writing costs the create the time of writing the volume's size once.
 */
public final class SystemImageFiles implements ImageFiles {

    /** Zeros written in pieces of 1 MiB: the largest request most disks take whole. */
    private static final int ZEROS_BYTES = 1 << 20;

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
            } catch (SyscallException e) {
                Files.deleteIfExists(image);
                throw new IOException("cannot allocate " + image + " in full: " + e.getMessage(), e);
            }
            writeZeros(image, bytes);
        }
    }

    /**
     * Zeros written over the first {@code bytes} of {@code image}, which turns its unwritten extents
     * into written ones, then synced. With direct I/O where the filesystem allows it, so that a
     * large image does not push the node's page cache out; buffered for a tail shorter than a block.
     */
    private static void writeZeros(Path image, long bytes) throws IOException {
        long direct = 0;
        try (FileChannel channel = FileChannel.open(image, StandardOpenOption.WRITE, ExtendedOpenOption.DIRECT)) {
            int alignment = (int) Files.getFileStore(image).getBlockSize();
            direct = bytes - bytes % alignment;
            write(channel, ByteBuffer.allocateDirect(ZEROS_BYTES + alignment).alignedSlice(alignment), 0, direct);
        } catch (IOException | UnsupportedOperationException e) {
            direct = 0; // no direct I/O on this filesystem: all of it buffered
        }
        try (FileChannel channel = FileChannel.open(image, StandardOpenOption.WRITE)) {
            write(channel, ByteBuffer.allocateDirect(ZEROS_BYTES), direct, bytes);
            channel.force(true);
        }
    }

    private static void write(FileChannel channel, ByteBuffer zeros, long from, long to) throws IOException {
        for (long offset = from; offset < to; ) {
            zeros.clear().limit((int) Math.min(zeros.capacity(), to - offset));
            while (zeros.hasRemaining()) {
                offset += channel.write(zeros, offset);
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
            // Unwritten, unlike create's: zeros written into a mounted volume's new range could
            // land after the volume's own first writes there.
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
            kernel.fsync(to);
            return method;
        } catch (SyscallException e) {
            Files.deleteIfExists(target);
            throw new IOException("cannot copy " + source + " to " + target + ": " + e.getMessage(), e);
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
