package dev.strata.csi.node.mount;

import java.io.IOException;
import java.nio.file.Path;

/** Reads how full a mounted filesystem is. */
public interface FilesystemStats {

    /**
     * The usage of the filesystem that holds {@code path}.
     *
     * @throws java.nio.file.NoSuchFileException if {@code path} does not exist
     */
    FilesystemUsage usage(Path path) throws IOException;
}
