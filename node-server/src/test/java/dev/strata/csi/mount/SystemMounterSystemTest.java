package dev.strata.csi.mount;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.system.Command;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** SystemMounter against the real kernel, with tmpfs for filesystems; needs root. */
class SystemMounterSystemTest {

    @TempDir
    Path dir;

    private final Mounter mounter = new SystemMounter(new Command());

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
        assertTrue(mounter.table().ofDevice(mounted.device()).contains(mounted));
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
    void aFailedMountSaysWhyOnOneLine() throws Exception {
        Path target = Files.createDirectory(dir.resolve("target"));
        MountException e = assertThrows(MountException.class,
                () -> mounter.mount("/dev/strata-no-such-device", target, "ext4", List.of()));
        assertTrue(e.getMessage().startsWith("mount /dev/strata-no-such-device on " + target + ": exit 32: mount: "),
                e.getMessage());
        assertFalse(e.getMessage().contains("\n"), e.getMessage());
        assertFalse(mounter.table().isMountPoint(target));
    }
}
