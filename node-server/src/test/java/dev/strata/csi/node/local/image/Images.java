package dev.strata.csi.node.local.image;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Path;

/** Image files for tests. */
final class Images {

    /** xfs wants at least 300 MiB; sparse, so it costs nothing until written. */
    static final long SIZE = 512L * 1024 * 1024;

    private Images() {}

    static Path sparse(Path file) throws IOException {
        try (RandomAccessFile image = new RandomAccessFile(file.toFile(), "rw")) {
            image.setLength(SIZE);
        }
        return file;
    }
}
