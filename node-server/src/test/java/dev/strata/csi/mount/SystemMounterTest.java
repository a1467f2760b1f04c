package dev.strata.csi.mount;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.system.CommandResult;
import dev.strata.csi.testing.FakeCommands;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The command lines SystemMounter builds; SystemMounterSystemTest mounts for real. */
class SystemMounterTest {

    @Test
    void mountPassesOptionsAsOneValueAndPathsAfterDoubleDash() throws MountException {
        FakeCommands commands = new FakeCommands();
        new SystemMounter(commands).mount("/dev/loop3", Path.of("/staging/pv 1"), "ext4", List.of("noatime", "discard"));
        assertEquals(List.of(List.of("mount", "-t", "ext4", "-o", "noatime,discard", "--", "/dev/loop3", "/staging/pv 1")),
                commands.calls());
    }

    @Test
    void mountWithoutOptionsHasNoDashO() throws MountException {
        FakeCommands commands = new FakeCommands();
        new SystemMounter(commands).mount("-o", Path.of("/staging"), "xfs", List.of());
        assertEquals(List.of(List.of("mount", "-t", "xfs", "--", "-o", "/staging")), commands.calls());
    }

    @Test
    void badOptionsSourcesAndTypesRunNothing() {
        FakeCommands commands = new FakeCommands();
        SystemMounter mounter = new SystemMounter(commands);
        assertThrows(MountException.class, () -> mounter.mount("/dev/loop3", Path.of("/s"), "ext4", List.of("ro,suid")));
        assertThrows(MountException.class, () -> mounter.mount("/dev/loop3\n", Path.of("/s"), "ext4", List.of()));
        assertThrows(MountException.class, () -> mounter.mount("", Path.of("/s"), "ext4", List.of()));
        assertThrows(MountException.class, () -> mounter.mount("/dev/loop3", Path.of("/s"), "-ext4", List.of()));
        assertThrows(MountException.class, () -> mounter.mount("/dev/loop3", Path.of("/s"), "ext4 -o", List.of()));
        assertEquals(List.of(), commands.calls());
    }

    @Test
    void aFailedMountIsOneLineNamingWhatFailed() {
        FakeCommands commands = new FakeCommands(argv -> new CommandResult(32, "",
                "mount: /s: wrong fs type, bad option, bad superblock on /dev/loop3.\n       dmesg(1) may have more information.\n"));
        MountException e = assertThrows(MountException.class,
                () -> new SystemMounter(commands).mount("/dev/loop3", Path.of("/s"), "xfs", List.of()));
        assertEquals("mount /dev/loop3 on /s: exit 32: mount: /s: wrong fs type, bad option, bad superblock on /dev/loop3.; "
                + "dmesg(1) may have more information.", e.getMessage());
    }

    @Test
    void aReadOnlyBindThatCannotBeMadeReadOnlyIsUndone() {
        FakeCommands commands = new FakeCommands(argv -> argv.contains("remount,bind,ro")
                ? new CommandResult(32, "", "mount: /p: permission denied.")
                : new CommandResult(0, "", ""));
        MountException e = assertThrows(MountException.class,
                () -> new SystemMounter(commands).bindMount(Path.of("/staging"), Path.of("/p"), true));
        assertEquals(List.of(
                List.of("mount", "--bind", "--", "/staging", "/p"),
                List.of("mount", "-o", "remount,bind,ro", "--", "/p"),
                List.of("umount", "--", "/p")), commands.calls());
        assertTrue(e.getMessage().startsWith("make bind mount /p read-only: exit 32"), e.getMessage());
    }

    @Test
    void aFailedUndoIsReportedToo() {
        FakeCommands commands = new FakeCommands(argv -> argv.contains("--bind")
                ? new CommandResult(0, "", "")
                : new CommandResult(32, "", argv.getFirst() + ": failed"));
        MountException e = assertThrows(MountException.class,
                () -> new SystemMounter(commands).bindMount(Path.of("/staging"), Path.of("/p"), true));
        assertEquals("make bind mount /p read-only: exit 32: mount: failed; and undoing the writable bind failed: "
                + "undo bind mount /p: exit 32: umount: failed", e.getMessage());
    }

    @Test
    void aWritableBindIsOneCommand() throws MountException {
        FakeCommands commands = new FakeCommands();
        new SystemMounter(commands).bindMount(Path.of("/staging"), Path.of("/p"), false);
        assertEquals(List.of(List.of("mount", "--bind", "--", "/staging", "/p")), commands.calls());
    }

    @Test
    void unmountingWhatIsNotMountedRunsNothing() throws MountException {
        FakeCommands commands = new FakeCommands();
        new SystemMounter(commands).unmount(Path.of("/no/such/mount/point"));
        assertEquals(List.of(), commands.calls());
    }
}
