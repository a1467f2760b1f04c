package dev.strata.csi.node.local.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.node.mount.SystemFilesystemStats;
import dev.strata.csi.testing.SystemState;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The blocks an image holds, read with statx(2), against what stat(1) says of the same file. */
class SystemImageFilesTest {

    private static final long MIB = 1024 * 1024;

    @TempDir
    Path dir;

    private final SystemImageFiles files = new SystemImageFiles(new Kernel(), new SystemFilesystemStats());

    @Test
    void aSparseImageHoldsWhatWasWrittenAndAFullOneItsSize() throws Exception {
        Path sparse = dir.resolve("sparse.img");
        files.create(sparse, 16 * MIB, Allocation.SPARSE);
        assertEquals(statBytes(sparse), files.allocatedBytes(sparse));
        assertTrue(files.allocatedBytes(sparse) < MIB, "a new sparse image holds next to nothing");

        Path full = dir.resolve("full.img");
        files.create(full, 16 * MIB, Allocation.FULL);
        assertEquals(statBytes(full), files.allocatedBytes(full));
        assertTrue(files.allocatedBytes(full) >= 16 * MIB, "a full image holds its size: " + files.allocatedBytes(full));
    }

    @Test
    void aMissingImageHoldsNothing() throws Exception {
        assertEquals(0, files.allocatedBytes(dir.resolve("missing.img")));
    }

    private static long statBytes(Path file) throws Exception {
        return Long.parseLong(SystemState.run("stat", "--format=%b", file.toString()).strip()) * 512;
    }
}
