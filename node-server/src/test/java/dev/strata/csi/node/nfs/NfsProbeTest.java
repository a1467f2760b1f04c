package dev.strata.csi.node.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.mount.FilesystemUsage;
import dev.strata.csi.system.Command;
import dev.strata.csi.system.Commands;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * NfsProbe with real child processes. A path on a share whose server is gone cannot be made here
 * (no NFS client), so a FAKE stat(1) that never returns stands for one: what is checked is the
 * mechanics, an answer within the deadline and no process left behind.
 */
class NfsProbeTest {

    @TempDir
    Path dir;

    @Test
    void aLookThatDoesNotReturnIsKilledAtTheDeadline() throws Exception {
        String marker = "nfs-probe-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        Path hung = dir.resolve("stat");
        // FAKE stat: blocks like a stat on a dead hard mount, in a grandchild as well as itself.
        Files.writeString(hung, "#!/bin/sh\nsh -c 'sleep 3600; : " + marker + "' &\nexec sh -c 'sleep 3601; : " + marker + "'\n");
        Files.setPosixFilePermissions(hung, PosixFilePermissions.fromString("rwx------"));
        Commands real = new Command();
        Commands fakeStat = (timeout, argv) -> {
            String[] replaced = argv.clone();
            if (replaced[0].equals("stat")) {
                replaced[0] = hung.toString();
            }
            return real.run(timeout, replaced);
        };
        NfsProbe probe = new NfsProbe(fakeStat, Duration.ofMillis(700));
        long start = System.nanoTime();
        assertEquals(NfsProbe.Health.NOT_RESPONDING, probe.health(dir));
        NfsProbe.Unhealthy e = assertThrows(NfsProbe.Unhealthy.class, () -> probe.usage(dir));
        assertEquals(NfsProbe.Health.NOT_RESPONDING, e.health());
        long millis = (System.nanoTime() - start) / 1_000_000;
        assertTrue(millis < 2 * 700 + 2000, "two looks answered within their deadlines, took " + millis + " ms");
        // The look waits for its own process only; the ones it started die of their SIGKILL when next scheduled.
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (running(marker) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertFalse(running(marker), "the blocked look and what it started are killed");
    }

    private static boolean running(String marker) {
        return ProcessHandle.allProcesses().anyMatch(p -> p.info().commandLine().orElse("").contains(marker));
    }

    @Test
    void aStaleHandleIsToldApartFromOtherFailures() throws Exception {
        Commands stale = (timeout, argv) -> new dev.strata.csi.system.CommandResult(1, "",
                "stat: cannot statx '/x': Stale file handle\n");
        assertEquals(NfsProbe.Health.STALE, new NfsProbe(stale, Duration.ofSeconds(1)).health(dir));
        Commands missing = (timeout, argv) -> new dev.strata.csi.system.CommandResult(1, "",
                "stat: cannot statx '/x': No such file or directory\n");
        assertThrows(MountException.class, () -> new NfsProbe(missing, Duration.ofSeconds(1)).health(dir));
    }

    @Test
    void usageIsWhatStatfsReports() throws Exception {
        NfsProbe probe = new NfsProbe(new Command(), Duration.ofSeconds(10));
        assertEquals(NfsProbe.Health.ANSWERS, probe.health(dir));
        FilesystemUsage usage = probe.usage(dir);
        var store = Files.getFileStore(dir);
        assertEquals(store.getTotalSpace(), usage.totalBytes());
        assertTrue(usage.availableBytes() <= usage.totalBytes() && usage.usedBytes() <= usage.totalBytes(), usage.toString());
        probe.chmod(dir, 0750);
        assertEquals("rwxr-x---", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));
    }
}
