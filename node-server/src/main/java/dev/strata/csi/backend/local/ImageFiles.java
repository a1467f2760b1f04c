package dev.strata.csi.backend.local;

import dev.strata.csi.agent.api.Allocation;
import java.io.IOException;
import java.nio.file.Path;

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

    /** The file's size in bytes. */
    long sizeBytes(Path image) throws IOException;

    /** Bytes the filesystem has allocated to the file (less than its size while sparse). */
    long allocatedBytes(Path image) throws IOException;

    /** Free and total bytes of the filesystem holding {@code dir}. */
    Space space(Path dir) throws IOException;

    record Space(long totalBytes, long availableBytes) {}
}
