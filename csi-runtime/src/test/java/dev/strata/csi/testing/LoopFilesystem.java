package dev.strata.csi.testing;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * An xfs filesystem of its own in a sparse image file, loop-mounted: for a pool or an export
 * whose free space a test measures. On the machine's shared disk, other work moves that figure
 * by gigabytes while the test runs; here only the test's own writes do. {@code mount -o loop}
 * detaches the loop device again at unmount.
 */
public record LoopFilesystem(Path image, Path mountPoint) implements AutoCloseable {

    /**
     * Makes the filesystem ({@code mkfs.xfs} with {@code options}, e.g. "-m", "reflink=1") in a
     * sparse {@code image} of {@code bytes} (300 MiB at least, mkfs.xfs's minimum) and mounts it
     * at {@code mountPoint}, made if missing.
     */
    public static LoopFilesystem mount(Path image, long bytes, Path mountPoint, String... options) throws Exception {
        Programs.run("truncate", "-s", Long.toString(bytes), image.toString());
        List<String> mkfs = new ArrayList<>(List.of("mkfs.xfs", "-q", "-f"));
        mkfs.addAll(List.of(options));
        mkfs.add(image.toString());
        Programs.run(mkfs.toArray(String[]::new));
        Files.createDirectories(mountPoint);
        Programs.run("mount", "-o", "loop", image.toString(), mountPoint.toString());
        return new LoopFilesystem(image, mountPoint);
    }

    /**
     * Unmounts it if it is still mounted. Not lazily: a test that left a volume of the pool
     * attached keeps it busy, and its SystemState.cleanUp then lists and removes what it left,
     * which fails the test instead of hiding it.
     */
    @Override
    public void close() throws Exception {
        if (Programs.execute("mountpoint", "-q", mountPoint.toString()).status() == 0) {
            Programs.execute("umount", mountPoint.toString());
        }
    }
}
