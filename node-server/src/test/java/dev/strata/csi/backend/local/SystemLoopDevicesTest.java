package dev.strata.csi.backend.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.Mounter;
import dev.strata.csi.mount.SystemMounter;
import dev.strata.csi.system.Command;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** SystemLoopDevices with real loop devices; needs root. */
class SystemLoopDevicesTest {

    @TempDir
    Path dir;

    private final LoopDevices loops = new SystemLoopDevices(new Command());
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
    void attachesFindsAndDetaches() throws Exception {
        Path image = Images.sparse(dir.resolve("a.img"));
        LoopDevice device = loops.attach(image);

        assertEquals(image.toRealPath(), device.backingFile());
        assertEquals(7, device.number().major());
        assertEquals(device.number(), nodeNumber(device.device()));
        assertEquals(Images.SIZE, loops.sizeBytes(device.device()));
        assertEquals(Optional.of(device), loops.find(image));
        assertTrue(loops.list().contains(device));

        loops.detach(device.device());
        assertEquals(Optional.empty(), loops.find(image));
        assertFalse(loops.list().stream().anyMatch(d -> d.backingFile().equals(device.backingFile())));
        loops.detach(device.device());
    }

    @Test
    void fallsBackToBufferedIoOnAFilesystemWithoutDirectIo() throws Exception {
        // ramfs cannot do O_DIRECT, so the kernel refuses a direct-I/O loop device on it.
        Path ramfs = Files.createDirectory(dir.resolve("ramfs"));
        mounter.mount("strata-test", ramfs, "ramfs", List.of());
        Path image = Files.createFile(ramfs.resolve("a.img"));
        Files.write(image, new byte[1024 * 1024]);

        LoopDevice device = loops.attach(image);
        assertFalse(device.directIo());
        assertEquals(Optional.of(device), loops.find(image));
        assertEquals(1024 * 1024, loops.sizeBytes(device.device()));
    }

    @Test
    void aDeletedImageStaysListedUnderItsOldPathButIsNotFound() throws Exception {
        Path image = Images.sparse(dir.resolve("a.img"));
        LoopDevice device = loops.attach(image);
        Files.delete(image);

        assertTrue(loops.list().contains(device), "sysfs now says \"" + image + " (deleted)\"");
        assertEquals(Optional.empty(), loops.find(image));
        Images.sparse(image);
        assertEquals(Optional.empty(), loops.find(image), "a new file at the same path is another image");

        loops.detach(device.device());
        assertFalse(loops.list().contains(device));
    }

    @Test
    void aMountedDeviceIsNotDetachedButLetGoOfOnUnmount() throws Exception {
        Path image = Images.sparse(dir.resolve("a.img"));
        LoopDevice device = loops.attach(image);
        new SystemFilesystems(new Command()).formatIfBlank(device.device(), "ext4");
        Path mnt = Files.createDirectory(dir.resolve("mnt"));
        mounter.mount(device.device().toString(), mnt, "ext4", List.of());

        DeviceException e = assertThrows(DeviceException.class, () -> loops.detach(device.device()));
        assertTrue(e.getMessage().contains("still in use"), e.getMessage());
        assertEquals(Optional.of(device), loops.find(image));

        // losetup --detach left the kernel's autoclear flag: the last close detaches it.
        mounter.unmount(mnt);
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (loops.find(image).isPresent() && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(Optional.empty(), loops.find(image));
    }

    /** The major:minor a device node stands for, decoded as Linux packs it into a dev_t. */
    static DeviceNumber nodeNumber(Path node) throws Exception {
        long rdev = (Long) Files.getAttribute(node, "unix:rdev");
        return new DeviceNumber((int) (((rdev >>> 8) & 0xfff) | ((rdev >>> 32) & ~0xfffL)),
                (int) ((rdev & 0xff) | ((rdev >>> 12) & ~0xffL)));
    }

    @Test
    void onlyRegularFilesAreAttached() {
        assertThrows(DeviceException.class, () -> loops.attach(dir.resolve("missing.img")));
        assertThrows(DeviceException.class, () -> loops.attach(dir));
    }
}
