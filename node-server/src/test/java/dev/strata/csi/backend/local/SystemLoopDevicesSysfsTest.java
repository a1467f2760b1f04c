package dev.strata.csi.backend.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.testing.FakeCommands;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** SystemLoopDevices reading a sysfs laid out by the test; SystemLoopDevicesTest uses the real one. */
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

    private SystemLoopDevices loops(FakeCommands commands) {
        return new SystemLoopDevices(commands, sys, dev);
    }

    @Test
    void listsAttachedDevicesByNumber() throws Exception {
        attached(10, images + "/b.img", false, 2048);
        attached(2, images + "/a.img", true, 4096);
        assertEquals(List.of(
                new LoopDevice(dev.resolve("loop2"), images.resolve("a.img"), new DeviceNumber(7, 2), true),
                new LoopDevice(dev.resolve("loop10"), images.resolve("b.img"), new DeviceNumber(7, 10), false)),
                loops(new FakeCommands()).list());
    }

    @Test
    void aDeletedImageIsListedUnderItsOldPathButNeverFound() throws Exception {
        Files.createFile(images.resolve("a.img"));
        attached(1, images + "/a.img (deleted)", true, 8);
        attached(2, images + "/a.img", true, 8);
        SystemLoopDevices loops = loops(new FakeCommands());
        assertEquals(List.of(images.resolve("a.img"), images.resolve("a.img")),
                loops.list().stream().map(LoopDevice::backingFile).toList());
        assertEquals(dev.resolve("loop2"), loops.find(images.resolve("a.img")).orElseThrow().device());
    }

    @Test
    void findsByTheImagesRealPath() throws Exception {
        Files.createFile(images.resolve("a.img"));
        Files.createSymbolicLink(root.resolve("link.img"), images.resolve("a.img"));
        attached(3, images + "/a.img", true, 8);
        SystemLoopDevices loops = loops(new FakeCommands());
        assertEquals(dev.resolve("loop3"), loops.find(root.resolve("link.img")).orElseThrow().device());
        assertEquals(Optional.empty(), loops.find(images.resolve("missing.img")));
    }

    @Test
    void sizeIsSectorsOf512Bytes() throws Exception {
        attached(4, images + "/a.img", true, 2097152);
        assertEquals(1L << 30, loops(new FakeCommands()).sizeBytes(Path.of("/dev/loop4")));
        assertThrows(DeviceException.class, () -> loops(new FakeCommands()).sizeBytes(Path.of("/dev/loop99")));
    }

    @Test
    void detachingWhatIsNotAttachedRunsNothing() throws Exception {
        FakeCommands commands = new FakeCommands();
        loops(commands).detach(Path.of("/dev/loop0"));
        loops(commands).detach(Path.of("/dev/loop77"));
        assertEquals(List.of(), commands.calls());
    }

    @Test
    void onlyLoopDevicesAreAccepted() {
        FakeCommands commands = new FakeCommands();
        assertEquals("/dev/vda is not a loop device",
                assertThrows(DeviceException.class, () -> loops(commands).detach(Path.of("/dev/vda"))).getMessage());
        assertThrows(DeviceException.class, () -> loops(commands).sizeBytes(Path.of("/dev/loop1p1")));
        assertEquals(List.of(), commands.calls());
    }

    @Test
    void makesTheDeviceNodeOnlyWhenItIsMissing() throws Exception {
        Path image = Files.createFile(images.resolve("a.img"));
        Files.createDirectories(sys.resolve("loop12"));
        Files.writeString(sys.resolve("loop12/dev"), "7:12\n");
        FakeCommands commands = new FakeCommands(argv -> switch (argv.getFirst() + " " + argv.get(1)) {
            case "losetup --find" -> argv.size() == 2 ? ok("/dev/loop12\n")
                    : Files.exists(dev.resolve("loop12")) ? attach(12, image)
                    : new CommandResult(1, "", "losetup: /dev/loop12: failed to set up loop device: No such file or directory");
            case "mknod -m" -> createNode(argv.get(3));
            default -> new CommandResult(1, "", "unexpected");
        });
        LoopDevice device = loops(commands).attach(image);
        assertEquals(new LoopDevice(dev.resolve("loop12"), image, new DeviceNumber(7, 12), true), device);
        assertEquals(List.of(
                List.of("losetup", "--find", "--show", "--direct-io=on", image.toString()),
                List.of("losetup", "--find", "--show", image.toString()),
                List.of("losetup", "--find"),
                List.of("mknod", "-m", "0600", dev.resolve("loop12").toString(), "b", "7", "12"),
                List.of("losetup", "--find", "--show", "--direct-io=on", image.toString())), commands.calls());

        // With the node there, attaching is one call: nothing is looked up or made first.
        FakeCommands again = new FakeCommands(argv -> attach(12, image));
        loops(again).attach(image);
        assertEquals(List.of(List.of("losetup", "--find", "--show", "--direct-io=on", image.toString())), again.calls());
    }

    @Test
    void fallsBackToBufferedIoWhenDirectIoCannotBeHad() throws Exception {
        Path image = Files.createFile(images.resolve("a.img"));
        Files.createFile(dev.resolve("loop5"));
        FakeCommands commands = new FakeCommands(argv -> argv.size() == 2 ? ok("/dev/loop5\n")
                : argv.contains("--direct-io=on") ? new CommandResult(1, "", "losetup: failed to set up loop device: Invalid argument")
                : attach(5, image, false));
        LoopDevice device = loops(commands).attach(image);
        assertEquals(false, device.directIo());
        assertEquals(List.of("losetup", "--find", "--show", image.toString()), commands.calls().getLast());
    }

    @Test
    void anOlderLosetupThatAttachedWithoutDirectIoIsTakenAtItsWord() throws Exception {
        Path image = Files.createFile(images.resolve("a.img"));
        Files.createFile(dev.resolve("loop6"));
        FakeCommands commands = new FakeCommands(argv -> {
            if (argv.size() == 2) {
                return ok("/dev/loop6\n");
            }
            attach(6, image, false);
            return new CommandResult(1, "/dev/loop6\n", "losetup: /dev/loop6: set direct io failed: Invalid argument");
        });
        assertEquals(false, loops(commands).attach(image).directIo());
        assertEquals(1, commands.calls().size(), "no second attach");
    }

    @Test
    void aMissingImageIsNotAttached() {
        FakeCommands commands = new FakeCommands();
        assertThrows(DeviceException.class, () -> loops(commands).attach(images.resolve("missing.img")));
        assertThrows(DeviceException.class, () -> loops(commands).attach(images));
        assertEquals(List.of(), commands.calls());
    }

    private static CommandResult ok(String stdout) {
        return new CommandResult(0, stdout, "");
    }

    private CommandResult attach(int n, Path image) {
        return attach(n, image, true);
    }

    /** What the kernel shows once losetup has attached. */
    private CommandResult attach(int n, Path image, boolean dio) {
        try {
            attached(n, image.toString(), dio, 8);
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return ok("/dev/loop" + n + "\n");
    }

    private static CommandResult createNode(String path) {
        try {
            Files.createFile(Path.of(path));
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
        return ok("");
    }
}
