package dev.strata.csi.node.local;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.node.mount.SystemFilesystemStats;
import dev.strata.csi.testing.SystemState;
import java.nio.file.Files;
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

    /**
     * fallocate alone leaves unwritten extents, whose first writes cost the pool's filesystem a
     * conversion each; a full image is written instead. filefrag(8) shows FIEMAP's flags. The
     * fallocate(1) control shows that this directory's filesystem has unwritten extents at all.
     */
    @Test
    void aFullImageHasNoUnwrittenExtentsAndReadsAsZeros() throws Exception {
        Path control = dir.resolve("control.img");
        SystemState.run("fallocate", "--length", Long.toString(8 * MIB), control.toString());
        assertTrue(SystemState.run("filefrag", "-v", control.toString()).contains("unwritten"),
                "the filesystem of " + dir + " keeps unwritten extents");

        Path full = dir.resolve("full.img");
        long bytes = 8 * MIB + 512; // a tail shorter than a block, written without direct I/O
        files.create(full, bytes, Allocation.FULL);
        String extents = SystemState.run("filefrag", "-v", full.toString());
        assertFalse(extents.contains("unwritten"), extents);
        assertEquals(bytes, Files.size(full));
        assertArrayEquals(new byte[(int) bytes], Files.readAllBytes(full));
    }

    @Test
    void aMissingImageHoldsNothing() throws Exception {
        assertEquals(0, files.allocatedBytes(dir.resolve("missing.img")));
    }

    private static long statBytes(Path file) throws Exception {
        return Long.parseLong(SystemState.run("stat", "--format=%b", file.toString()).strip()) * 512;
    }
}
