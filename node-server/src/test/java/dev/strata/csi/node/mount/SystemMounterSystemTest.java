package dev.strata.csi.node.mount;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.linux.Kernel;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.system.Command;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** SystemMounter against the real kernel, with tmpfs for filesystems; needs root. */
@Tag("root")
class SystemMounterSystemTest {

    @TempDir
    Path dir;

    private final Mounter mounter = new SystemMounter(new Kernel(), new Command(), MountHelpers.none());

    @BeforeEach
    void root() {
        Root.require();
    }

    @AfterEach
    void cleanUp() throws Exception {
        SystemState.cleanUp(dir);
    }

    @Test
    void mountsWithOptionsOnAPathWithASpace() throws Exception {
        Path target = Files.createDirectory(dir.resolve("staging pv 1"));
        mounter.mount("strata-test", target, "tmpfs", List.of("size=1m", "mode=0700", "noexec"));

        MountPoint mounted = mounter.table().at(target).orElseThrow();
        assertEquals("tmpfs", mounted.fsType());
        assertEquals("strata-test", mounted.source());
        assertEquals(target.toRealPath(), mounted.mountPoint());
        assertTrue(mounted.options().contains("noexec"), mounted.toString());
        assertTrue(mounted.superOptions().contains("size=1024k"), mounted.toString());
        assertTrue(mounter.table().all().contains(mounted));
    }

    @Test
    void unmountTakesOffTheTopMountAndThenDoesNothing() throws Exception {
        Path target = Files.createDirectory(dir.resolve("stack"));
        mounter.mount("lower", target, "tmpfs", List.of());
        mounter.mount("upper", target, "tmpfs", List.of());
        assertEquals("upper", mounter.table().at(target).orElseThrow().source());
        assertEquals(2, mounter.table().under(target).size());

        mounter.unmount(target);
        assertEquals("lower", mounter.table().at(target).orElseThrow().source());
        mounter.unmount(target);
        assertFalse(mounter.table().isMountPoint(target));
        mounter.unmount(target);
        mounter.unmount(dir.resolve("never created"));
    }

    @Test
    void readOnlyBindRefusesWritesWhileTheSourceStaysWritable() throws Exception {
        Path staging = Files.createDirectory(dir.resolve("staging"));
        Path published = Files.createDirectory(dir.resolve("published"));
        mounter.mount("strata-test", staging, "tmpfs", List.of("size=1m"));
        Files.writeString(staging.resolve("data"), "hello");

        mounter.bindMount(staging, published, true);
        MountPoint bind = mounter.table().at(published).orElseThrow();
        assertTrue(bind.readOnly(), bind.toString());
        assertEquals(mounter.table().at(staging).orElseThrow().device(), bind.device());
        assertEquals("hello", Files.readString(published.resolve("data")));
        FileSystemException refused = assertThrows(FileSystemException.class,
                () -> Files.writeString(published.resolve("data"), "changed"));
        assertEquals("Read-only file system", refused.getReason());

        Files.writeString(staging.resolve("data"), "still writable");
        assertEquals("still writable", Files.readString(published.resolve("data")));
        assertFalse(mounter.table().at(staging).orElseThrow().readOnly());
    }

    @Test
    void writableBindWritesThrough() throws Exception {
        Path staging = Files.createDirectory(dir.resolve("staging"));
        Path published = Files.createDirectory(dir.resolve("published"));
        mounter.mount("strata-test", staging, "tmpfs", List.of("size=1m"));
        mounter.bindMount(staging, published, false);
        assertFalse(mounter.table().at(published).orElseThrow().readOnly());
        Files.writeString(published.resolve("data"), "through");
        assertEquals("through", Files.readString(staging.resolve("data")));
    }

    @Test
    void optionsTakeTheSameEffectAsWithUtilLinuxMount() throws Exception {
        List<List<String>> cases = List.of(
                List.of("noexec", "nosuid", "nodev", "noatime"),
                List.of("ro"),
                List.of("ro", "rw"),
                List.of("ro", "defaults"),
                List.of("user"),
                List.of("user", "exec"),
                List.of("owner"),
                List.of("strictatime"),
                List.of("nodiratime", "lazytime"),
                List.of("sync", "dirsync"),
                List.of("nosymfollow"),
                List.of("size=2m", "noexec", "mode=0711", "nr_inodes=100"),
                List.of("noauto", "nofail", "_netdev", "comment=x", "x-foo", "nouser", "auto"),
                List.of("shared", "noexec"),
                List.of("private"));
        for (List<String> options : cases) {
            Path ours = Files.createDirectory(dir.resolve("ours"));
            Path theirs = Files.createDirectory(dir.resolve("theirs"));
            try {
                mounter.mount("strata-test", ours, "tmpfs", options);
                String out = SystemState.run("mount", "-t", "tmpfs", "-o", String.join(",", options), "strata-test", theirs.toString());
                assertEquals(effect(theirs), effect(ours), options + "; mount(8) said: " + out);
            } finally {
                SystemState.cleanUp(dir);
                Files.delete(ours);
                Files.delete(theirs);
            }
        }
    }

    /** Per-mount and filesystem options and propagation of the mount at {@code path}, as findmnt shows them. */
    private static String effect(Path path) throws Exception {
        String shown = SystemState.run("findmnt", "--noheadings", "--raw", "--output", "VFS-OPTIONS,FS-OPTIONS,PROPAGATION",
                "--mountpoint", path.toString()).strip();
        assertFalse(shown.isEmpty(), "nothing mounted at " + path);
        return shown;
    }

    @Test
    void aReadOnlyBindKeepsTheFlagsItTookFromItsSourceAsMountDoes() throws Exception {
        Path staging = Files.createDirectory(dir.resolve("staging"));
        Path published = Files.createDirectory(dir.resolve("published"));
        mounter.mount("strata-test", staging, "tmpfs", List.of("nosuid", "nodev", "noexec", "noatime"));
        mounter.bindMount(staging, published, true);
        assertEquals("ro,nosuid,nodev,noexec,noatime", SystemState.run("findmnt", "--noheadings", "--raw", "--output",
                "VFS-OPTIONS", "--mountpoint", published.toString()).strip());
    }

    @Test
    void aFailedMountSaysWhyOnOneLine() throws Exception {
        Path target = Files.createDirectory(dir.resolve("target"));
        MountException e = assertThrows(MountException.class,
                () -> mounter.mount("/dev/strata-no-such-device", target, "ext4", List.of()));
        assertEquals("mount /dev/strata-no-such-device on " + target + ": source /dev/strata-no-such-device does not exist: "
                + "No such file or directory (ENOENT)", e.getMessage());
        assertFalse(mounter.table().isMountPoint(target));
    }

    @Test
    void mountErrorsNameTheirCause() throws Exception {
        Path target = Files.createDirectory(dir.resolve("target"));
        assertEquals("mount strata-test on " + target + ": unknown filesystem type \"strata-nofs\": No such device (ENODEV)",
                assertThrows(MountException.class, () -> mounter.mount("strata-test", target, "strata-nofs", List.of())).getMessage());
        assertEquals("mount strata-test on " + target + ": wrong filesystem type, bad option or bad superblock on strata-test "
                + "(the kernel log says which): Invalid argument (EINVAL)",
                assertThrows(MountException.class, () -> mounter.mount("strata-test", target, "tmpfs", List.of("strata_bogus=1")))
                        .getMessage());
        Path missing = dir.resolve("missing");
        assertEquals("mount strata-test on " + missing + ": mount point " + missing + " does not exist: No such file or directory (ENOENT)",
                assertThrows(MountException.class, () -> mounter.mount("strata-test", missing, "tmpfs", List.of())).getMessage());
        assertEquals("bind mount " + missing + " on " + target + ": " + missing + " does not exist: No such file or directory (ENOENT)",
                assertThrows(MountException.class, () -> mounter.bindMount(missing, target, false)).getMessage());
        assertFalse(mounter.table().isMountPoint(target));
    }

    @Test
    void aBusyMountIsNotUnmountedAndSaysSo() throws Exception {
        Path target = Files.createDirectory(dir.resolve("target"));
        mounter.mount("strata-test", target, "tmpfs", List.of("size=1m"));
        try (var open = java.nio.channels.FileChannel.open(target.resolve("held"),
                java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.WRITE)) {
            MountException e = assertThrows(MountException.class, () -> mounter.unmount(target));
            assertEquals("umount " + target + ": target is busy (files open or mounts below it): Device or resource busy (EBUSY)",
                    e.getMessage());
            assertTrue(SystemState.mountAt(target).isPresent());
        }
        mounter.unmount(target);
        assertEquals(java.util.Optional.empty(), SystemState.mountAt(target));
    }
}
