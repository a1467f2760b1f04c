package dev.strata.csi.node.mount;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.linux.Kernel;
import dev.strata.csi.system.Command;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

@Tag("root")
class SystemFilesystemStatsTest {

    private static final long MIB = 1024 * 1024;

    @TempDir
    Path dir;

    private final FilesystemStats stats = new SystemFilesystemStats();

    @AfterEach
    void cleanUp() throws Exception {
        SystemState.cleanUp(dir);
    }

    @Test
    void readsAFilesystemOfKnownSizeAsDfDoes() throws Exception {
        Root.require();
        Path mnt = Files.createDirectory(dir.resolve("mnt"));
        new SystemMounter(new Kernel(), new Command(), MountHelpers.none()).mount("strata-test", mnt, "tmpfs", List.of("size=64m", "nr_inodes=1000"));
        Files.write(mnt.resolve("data"), new byte[(int) (3 * MIB)]);

        FilesystemUsage usage = Df.assertAgrees(stats, mnt);
        assertEquals(64 * MIB, usage.totalBytes());
        assertEquals(3 * MIB, usage.usedBytes());
        assertEquals(61 * MIB, usage.availableBytes());
        assertEquals(1000, usage.totalInodes());
        assertEquals(2, usage.usedInodes(), "the root directory and the file");
        assertEquals(998, usage.freeInodes());
    }

    @Test
    void readsTheFilesystemHoldingAnyPath() throws Exception {
        // Not compared with df: other processes write to this filesystem meanwhile.
        FilesystemUsage usage = stats.usage(dir);
        assertTrue(usage.totalBytes() > 0 && usage.usedBytes() > 0 && usage.availableBytes() <= usage.totalBytes(), usage.toString());
        assertTrue(usage.totalInodes() > 0 && usage.usedInodes() > 0, usage.toString());
    }

    @Test
    void aMissingPathIsNoSuchFile() {
        NoSuchFileException e = assertThrows(NoSuchFileException.class, () -> stats.usage(dir.resolve("gone")));
        assertEquals("No such file or directory", e.getReason());
    }
}
