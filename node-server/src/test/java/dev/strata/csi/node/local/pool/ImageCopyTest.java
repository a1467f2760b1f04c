package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.Kernel.DataRange;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.node.local.image.ImageFiles.CopyMethod;
import dev.strata.csi.node.local.image.SystemImageFiles;
import dev.strata.csi.node.mount.SystemFilesystemStats;
import dev.strata.csi.testing.SystemState;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Image copies on pools of each filesystem, loop-mounted here: a reflink where the filesystem
 * shares extents (xfs made with reflink, as mkfs.xfs does by default; btrfs), else the data ranges
 * copied with the holes kept. Either way the copy reads back byte for byte.
 */
@Tag("root")
class ImageCopyTest {

    private static final long MIB = 1024 * 1024;
    private static final long IMAGE = 64 * MIB;

    @TempDir
    Path dir;

    private final SystemImageFiles files = new SystemImageFiles(new Kernel(), new SystemFilesystemStats());

    @AfterEach
    void cleanUp() throws Exception {
        SystemState.cleanUp(dir);
    }

    @ParameterizedTest
    @CsvSource({"ext4, SPARSE_COPY", "xfs, REFLINK", "btrfs, REFLINK"})
    void aCopyReadsBackAndKeepsTheHoles(String fsType, CopyMethod expected) throws Exception {
        Path pool = pool(fsType);
        Path source = pool.resolve("pvc-1.img");
        files.create(source, IMAGE, Allocation.SPARSE);
        // Data at the start, in the middle and in the last MiB; holes between and after.
        List<Long> written = List.of(0L, 20 * MIB, IMAGE - MIB);
        Random random = new Random(16);
        try (RandomAccessFile file = new RandomAccessFile(source.toFile(), "rw")) {
            for (long offset : written) {
                byte[] data = new byte[(int) MIB];
                random.nextBytes(data);
                file.seek(offset);
                file.write(data);
            }
            file.getFD().sync();
        }
        List<DataRange> ranges = files.dataRanges(source);
        for (long offset : written) {
            assertTrue(ranges.stream().anyMatch(range -> range.offset() <= offset && offset + MIB <= range.offset() + range.length()),
                    "data at " + offset + " is in a range: " + ranges);
        }
        long inRanges = ranges.stream().mapToLong(DataRange::length).sum();
        assertTrue(inRanges < IMAGE / 2, "the holes are not data: " + ranges);

        Path target = pool.resolve("snap-1.img");
        Files.writeString(target, "a leftover of an interrupted copy");
        assertEquals(expected, files.copy(source, target));

        assertEquals(IMAGE, Files.size(target));
        assertArrayEquals(sha256(source), sha256(target));
        assertTrue(files.allocatedBytes(target) <= files.allocatedBytes(source) + MIB,
                "the copy is as sparse as its source: " + files.allocatedBytes(target) + " against " + files.allocatedBytes(source));
        if (expected == CopyMethod.REFLINK) {
            // The copy shares the source's extents: writing one leaves the other as it was.
            byte[] before = sha256(source);
            try (RandomAccessFile file = new RandomAccessFile(target.toFile(), "rw")) {
                file.seek(0);
                file.write(new byte[4096]);
            }
            assertArrayEquals(before, sha256(source));
        }
    }

    /** A filesystem of {@code fsType} in a file, loop-mounted below the test's directory. */
    private Path pool(String fsType) throws Exception {
        Path backing = dir.resolve(fsType + ".fs");
        try (RandomAccessFile file = new RandomAccessFile(backing.toFile(), "rw")) {
            file.setLength(320 * MIB); // mkfs.xfs wants 300 MiB
        }
        String mkfs = switch (fsType) {
            case "ext4" -> SystemState.run("mkfs.ext4", "-q", "-F", backing.toString());
            case "xfs" -> SystemState.run("mkfs.xfs", "-q", "-f", backing.toString());
            default -> SystemState.run("mkfs.btrfs", "-q", "-f", backing.toString());
        };
        Path pool = Files.createDirectory(dir.resolve("pool-" + fsType));
        String mount = SystemState.run("mount", "-o", "loop", backing.toString(), pool.toString());
        assertTrue(SystemState.mountAt(pool).isPresent(), mkfs + mount);
        return pool;
    }

    private static byte[] sha256(Path file) throws Exception {
        MessageDigest digest = MessageDigest.getInstance("SHA-256");
        try (var in = Files.newInputStream(file)) {
            byte[] buffer = new byte[1 << 20];
            for (int n; (n = in.read(buffer)) > 0; ) {
                digest.update(buffer, 0, n);
            }
        }
        return digest.digest();
    }
}
