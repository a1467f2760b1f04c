package dev.strata.csi.node.local.image;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.Kernel.DataRange;
import dev.strata.csi.linux.Kernel.Extent;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/** Image files on the pool's filesystem. */
public interface ImageFiles {

    /** Creates {@code image} of exactly {@code bytes}, replacing a leftover of an interrupted create; durable on return. */
    void create(Path image, long bytes, Allocation allocation) throws IOException;

    /**
     * Grows {@code image} to {@code bytes} if it is smaller, keeping its allocation: a sparse file
     * stays sparse, a fully allocated one gets its new blocks allocated; durable on return. A
     * larger file is left as it is: nothing is ever cut off.
     */
    void grow(Path image, long bytes, Allocation allocation) throws IOException;

    /** How {@link #copy} made its copy. */
    enum CopyMethod {
        /** FICLONE: the copy shares the source's extents until either is written (xfs with reflink, btrfs). */
        REFLINK,
        /** The source's data ranges copied (copy_file_range), its holes left holes: the copy is as sparse as the source. */
        SPARSE_COPY
    }

    /**
     * Makes {@code target} (replacing a leftover of an interrupted copy) a copy of {@code source}
     * of the same size: a reflink where the filesystem can, else a sparse copy. Not durable until
     * {@link #sync}: the copy is what a frozen source is needed for, the sync is not, so a caller
     * holding the source frozen syncs after the thaw. The caller keeps {@code source} from being
     * written meanwhile (a frozen filesystem, a lock).
     */
    CopyMethod copy(Path source, Path target) throws IOException;

    /**
     * Makes {@code length} bytes at {@code offset} of {@code image} read as zeros, as a hole where
     * the filesystem can punch one (else written as zeros); the file keeps its size.
     */
    void punchHole(Path image, long offset, long length) throws IOException;

    /** Makes {@code image}'s data and size durable (fsync). */
    void sync(Path image) throws IOException;

    /** The ranges of {@code image} that hold data, in order; the rest reads as zeros. */
    List<DataRange> dataRanges(Path image) throws IOException;

    /**
     * The file's extents (FIEMAP), in order of offset: where each lies on the device, which tells
     * the extents two reflinked files still share ({@link dev.strata.csi.node.local.blocks.ExtentComparison}).
     */
    List<Extent> extents(Path image) throws IOException;

    /** The file's size in bytes. */
    long sizeBytes(Path image) throws IOException;

    /** Bytes the filesystem has allocated to the file (less than its size while sparse). */
    long allocatedBytes(Path image) throws IOException;

    /** Free and total bytes of the filesystem holding {@code dir}. */
    Space space(Path dir) throws IOException;

    record Space(long totalBytes, long availableBytes) {}
}
