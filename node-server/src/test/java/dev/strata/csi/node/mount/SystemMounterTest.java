package dev.strata.csi.node.mount;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.linux.Kernel;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.testing.FakeCommands;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The command lines SystemMounter builds for a filesystem type with a mount helper, and the
 * checks every mount passes first; SystemMounterSystemTest mounts for real.
 */
class SystemMounterTest {

    @TempDir
    Path sbin;

    private MountHelpers helpers;

    @BeforeEach
    void helpers() throws Exception {
        for (String program : List.of("mount.nfs", "mount.xfs", "mount.ext4")) {
            Files.createFile(sbin.resolve(program), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwxr-xr-x")));
        }
        Files.createFile(sbin.resolve("mount.cifs")); // not executable: not a helper
        helpers = new MountHelpers(List.of(sbin));
    }

    private SystemMounter mounter(FakeCommands commands) {
        return new SystemMounter(new Kernel(), commands, helpers);
    }

    @Test
    void onlyExecutableHelpersCount() {
        assertEquals(true, helpers.mount("nfs"));
        assertEquals(false, helpers.mount("cifs"));
        assertEquals(false, helpers.mount("btrfs"));
        assertEquals(false, helpers.umount("nfs"));
        assertEquals(false, MountHelpers.none().mount("nfs"));
    }

    @Test
    void aTypeWithAHelperIsMountedByMountWithOptionsAsOneValueAndPathsAfterDoubleDash() throws MountException {
        FakeCommands commands = new FakeCommands();
        mounter(commands).mount("server:/export", Path.of("/staging/pv 1"), "nfs", List.of("vers=4.1", "noatime"));
        assertEquals(List.of(List.of("mount", "-t", "nfs", "-o", "vers=4.1,noatime", "--", "server:/export", "/staging/pv 1")),
                commands.calls());
    }

    @Test
    void mountWithoutOptionsHasNoDashO() throws MountException {
        FakeCommands commands = new FakeCommands();
        mounter(commands).mount("-o", Path.of("/staging"), "xfs", List.of());
        assertEquals(List.of(List.of("mount", "-t", "xfs", "--", "-o", "/staging")), commands.calls());
    }

    @Test
    void badOptionsSourcesAndTypesRunNothing() {
        FakeCommands commands = new FakeCommands();
        SystemMounter mounter = mounter(commands);
        assertThrows(MountException.class, () -> mounter.mount("/dev/loop3", Path.of("/s"), "ext4", List.of("ro,suid")));
        assertThrows(MountException.class, () -> mounter.mount("/dev/loop3\n", Path.of("/s"), "ext4", List.of()));
        assertThrows(MountException.class, () -> mounter.mount("", Path.of("/s"), "ext4", List.of()));
        assertThrows(MountException.class, () -> mounter.mount("/dev/loop3", Path.of("/s"), "-ext4", List.of()));
        assertThrows(MountException.class, () -> mounter.mount("/dev/loop3", Path.of("/s"), "ext4 -o", List.of()));
        assertThrows(MountException.class, () -> mounter.mount("/dev/loop3", Path.of("/s"), "btrfs", List.of("loop")));
        assertEquals(List.of(), commands.calls());
    }

    @Test
    void aFailedHelperMountIsOneLineNamingWhatFailed() {
        FakeCommands commands = new FakeCommands(argv -> new CommandResult(32, "",
                "mount: /s: wrong fs type, bad option, bad superblock on /dev/loop3.\n       dmesg(1) may have more information.\n"));
        MountException e = assertThrows(MountException.class,
                () -> mounter(commands).mount("/dev/loop3", Path.of("/s"), "xfs", List.of()));
        assertEquals("mount /dev/loop3 on /s: exit 32: mount: /s: wrong fs type, bad option, bad superblock on /dev/loop3.; "
                + "dmesg(1) may have more information.", e.getMessage());
    }

    @Test
    void unmountingWhatIsNotMountedRunsNothing() throws MountException {
        FakeCommands commands = new FakeCommands();
        mounter(commands).unmount(Path.of("/no/such/mount/point"));
        assertEquals(List.of(), commands.calls());
    }
}
