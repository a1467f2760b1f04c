package dev.strata.csi.backend.local;

import dev.strata.csi.agent.api.Allocation;
import java.io.IOException;
import java.nio.file.Path;

/** Image files on the pool's filesystem. */
public interface ImageFiles {

    /** Creates {@code image} of exactly {@code bytes}, replacing a leftover of an interrupted create; durable on return. */
    void create(Path image, long bytes, Allocation allocation) throws IOException;

    /** Bytes the filesystem has allocated to the file (less than its size while sparse). */
    long allocatedBytes(Path image) throws IOException;

    /** Free and total bytes of the filesystem holding {@code dir}. */
    Space space(Path dir) throws IOException;

    record Space(long totalBytes, long availableBytes) {}
}
