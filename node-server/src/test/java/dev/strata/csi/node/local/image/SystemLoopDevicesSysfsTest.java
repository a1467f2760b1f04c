package dev.strata.csi.node.local.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.linux.Kernel;
import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * SystemLoopDevices reading a sysfs laid out by the test; SystemLoopDevicesTest uses the real one,
 * and is where listing and finding are tested: they ask the devices themselves (LOOP_GET_STATUS64).
 */
class SystemLoopDevicesSysfsTest {

    @TempDir
    Path root;

    private Path sys;
    private Path dev;
    private Path images;

    @BeforeEach
    void layout() throws IOException {
        sys = Files.createDirectories(root.resolve("sys/block"));
        dev = Files.createDirectories(root.resolve("dev"));
        images = Files.createDirectories(root.resolve("images")).toRealPath();
        Files.createDirectories(sys.resolve("vda"));
        Files.createDirectories(sys.resolve("loop0")); // exists, not attached
    }

    private void attached(int n, String backingFile, boolean dio, long sectors) throws IOException {
        Path loop = Files.createDirectories(sys.resolve("loop" + n + "/loop"));
        Files.writeString(loop.resolve("backing_file"), backingFile + "\n");
        Files.writeString(loop.resolve("dio"), dio ? "1\n" : "0\n");
        Files.writeString(loop.getParent().resolve("dev"), "7:" + n + "\n");
        Files.writeString(loop.getParent().resolve("size"), sectors + "\n");
    }

    private SystemLoopDevices loops() {
        return new SystemLoopDevices(new Kernel(), sys, dev, true);
    }

    @Test
    void sizeIsSectorsOf512Bytes() throws Exception {
        attached(4, images + "/a.img", true, 2097152);
        assertEquals(1L << 30, loops().sizeBytes(Path.of("/dev/loop4")));
        assertThrows(DeviceException.class, () -> loops().sizeBytes(Path.of("/dev/loop99")));
    }

    @Test
    void detachingWhatIsNotAttachedTouchesNoDevice() throws Exception {
        // The test's /dev is empty: any attempt to open a device node would fail.
        loops().detach(Path.of("/dev/loop0"));
        loops().detach(Path.of("/dev/loop77"));
        try (var nodes = Files.list(dev)) {
            assertEquals(List.of(), nodes.toList());
        }
    }

    @Test
    void onlyLoopDevicesAreAccepted() {
        assertEquals("/dev/vda is not a loop device",
                assertThrows(DeviceException.class, () -> loops().detach(Path.of("/dev/vda"))).getMessage());
        assertThrows(DeviceException.class, () -> loops().sizeBytes(Path.of("/dev/loop1p1")));
    }
}
