package dev.strata.csi.backend.nfs;

import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.testing.FakeCommands;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The command lines NfsMounter runs, against stand-in tools (no NFS client exists on these machines). */
class NfsMounterTest {

    final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    final Log log = new Log(new PrintStream(logged, true), 0);

    @Test
    void mountsWithTheOptionsAsOneArgumentAndTheSourceAfterDashDash() throws Exception {
        FakeCommands tools = new FakeCommands();
        new NfsMounter(tools, Duration.ofSeconds(5), log).mount(new NfsVolume("nfs.example", "/srv", "a b"), Path.of("/stage"),
                List.of("nfsvers=3", "hard"));
        assertEquals(List.of(List.of("mount", "-t", "nfs", "-o", "nfsvers=3,hard", "--", "nfs.example:/srv/a b", "/stage")), tools.calls());
    }

    @Test
    void optionsThatChangeWhatIsMountedAreRefusedBeforeAnyCommand() {
        FakeCommands tools = new FakeCommands();
        NfsMounter mounter = new NfsMounter(tools, Duration.ofSeconds(5), log);
        assertThrows(MountException.class, () -> mounter.mount(new NfsVolume("s", "/srv", ""), Path.of("/stage"), List.of("bind")));
        assertThrows(MountException.class, () -> mounter.mount(new NfsVolume("s", "/srv", ""), Path.of("/stage"), List.of("ro,loop")));
        assertEquals(List.of(), tools.calls());
    }

    @Test
    void anUnmountThatHangsOnADeadServerIsForcedThenMadeLazy() throws Exception {
        FakeCommands tools = new FakeCommands(argv -> {
            if (argv.contains("--lazy")) {
                return new CommandResult(0, "", "");
            }
            if (argv.contains("--force")) {
                return new CommandResult(32, "", "umount.nfs4: /stage: device is busy");
            }
            throw new CommandException("umount did not finish within 5000 ms; killed it");
        });
        new NfsMounter(tools, Duration.ofSeconds(5), log).unmount(Path.of("/stage"));
        assertEquals(List.of(
                List.of("umount", "--no-canonicalize", "--", "/stage"),
                List.of("umount", "--no-canonicalize", "--force", "--", "/stage"),
                List.of("umount", "--no-canonicalize", "--lazy", "--", "/stage")), tools.calls());
        assertTrue(logged.toString().contains("detaching it lazily"), logged.toString());
    }

    @Test
    void aPlainUnmountThatWorksIsAllThatRuns() throws Exception {
        FakeCommands tools = new FakeCommands();
        new NfsMounter(tools, Duration.ofSeconds(5), log).unmount(Path.of("/stage"));
        assertEquals(1, tools.calls().size());
    }

    @Test
    void whenEvenTheLazyUnmountFailsTheErrorSaysSo() {
        FakeCommands tools = new FakeCommands(argv -> new CommandResult(32, "", "umount: /stage: not mounted"));
        MountException e = assertThrows(MountException.class,
                () -> new NfsMounter(tools, Duration.ofSeconds(5), log).unmount(Path.of("/stage")));
        assertTrue(e.getMessage().startsWith("umount --lazy /stage: exit 32"), e.getMessage());
    }
}
