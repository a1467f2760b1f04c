package dev.strata.csi.node.local.image;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.fs.SystemFilesystems;
import dev.strata.csi.node.mount.MountHelpers;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.node.mount.SystemMounter;
import dev.strata.csi.system.Command;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** SystemLoopDevices with real loop devices; needs root. */
@Tag("root")
class SystemLoopDevicesTest {

    @TempDir
    Path dir;

    private final Kernel kernel = new Kernel();
    private final LoopDevices loops = new SystemLoopDevices(kernel);
    /** As on a kernel before 5.8: LOOP_SET_FD and LOOP_SET_STATUS64 instead of LOOP_CONFIGURE. */
    private final LoopDevices legacyLoops = new SystemLoopDevices(kernel, Path.of("/sys/block"), Path.of("/dev"), false);
    private final Mounter mounter = new SystemMounter(kernel, new Command(), MountHelpers.none());

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
        assertEquals(FileIdentity.of(image), device.backing());
        assertEquals(statIdentity(image), device.backing().toString());
        assertFalse(device.deleted());
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

    /**
     * Another process (here another thread) detaching its loop devices while this one lists them:
     * a device whose sysfs entries answer ENODEV while the kernel removes them is gone, not an
     * error that would fail the caller's DeleteVolume or ControllerPublishVolume.
     */
    @Test
    void devicesDetachedWhileTheListIsReadAreLeftOut() throws Exception {
        List<Path> images = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            images.add(Images.sparse(dir.resolve("churn-" + i + ".img")));
        }
        AtomicBoolean stop = new AtomicBoolean();
        AtomicInteger cycles = new AtomicInteger();
        Thread churn = Thread.ofPlatform().start(() -> {
            try {
                while (!stop.get()) {
                    for (Path image : images) {
                        loops.detach(loops.attach(image).device());
                    }
                    cycles.incrementAndGet();
                }
            } catch (DeviceException e) {
                throw new IllegalStateException(e);
            }
        });
        try {
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            int lists = 0;
            while (System.nanoTime() < until && churn.isAlive()) {
                loops.list(); // throws if a device going away is taken for an error
                lists++;
            }
            assertTrue(lists > 100 && cycles.get() > 10, lists + " lists during " + cycles.get() + " attach-detach cycles");
        } finally {
            stop.set(true);
            churn.join();
        }
    }

    @Test
    void attachesWithDirectIoAndNoAutoclearAsLosetupShows() throws Exception {
        Path image = Images.sparse(dir.resolve("a.img"));
        LoopDevice device = loops.attach(image);

        assertTrue(device.directIo());
        assertEquals(List.of(device.device() + " " + image.toRealPath() + " 1 0 0 0 0"),
                losetup(device.device(), "NAME,BACK-FILE,DIO,AUTOCLEAR,RO,OFFSET,SIZELIMIT"), "offset and size limit 0: the whole file");
        assertEquals(Images.SIZE, loops.sizeBytes(device.device()));
        assertEquals(List.of(device.device().toString()), SystemState.loopDevicesOf(image));
        loops.detach(device.device());
        assertEquals(List.of(), SystemState.loopDevicesOf(image));
    }

    @Test
    void theLegacyIoctlsOfOlderKernelsAttachAlike() throws Exception {
        Path image = Images.sparse(dir.resolve("a.img"));
        LoopDevice device = legacyLoops.attach(image);

        assertTrue(device.directIo(), "LOOP_SET_DIRECT_IO after LOOP_SET_FD");
        assertEquals(List.of(device.device() + " " + image.toRealPath() + " 1 0 0"),
                losetup(device.device(), "NAME,BACK-FILE,DIO,AUTOCLEAR,RO"));
        legacyLoops.detach(device.device());
        assertEquals(List.of(), SystemState.loopDevicesOf(image));
    }

    @Test
    void theLegacyIoctlsFallBackToBufferedIoToo() throws Exception {
        Path image = ramfsImage();
        LoopDevice device = legacyLoops.attach(image);
        assertFalse(device.directIo());
        assertEquals(List.of("0"), losetup(device.device(), "DIO"));
    }

    @Test
    void anImageOnAReadOnlyMountIsAttachedReadOnlyAsLosetupDoes() throws Exception {
        Path tmpfs = Files.createDirectory(dir.resolve("tmpfs"));
        mounter.mount("strata-test", tmpfs, "tmpfs", List.of("size=4m"));
        Path image = Files.write(tmpfs.resolve("a.img"), new byte[1024 * 1024]);
        SystemState.run("mount", "-o", "remount,ro", tmpfs.toString());

        LoopDevice device = loops.attach(image);
        assertEquals(List.of("1"), losetup(device.device(), "RO"));
    }

    @Test
    void withoutLoopControlOrDeviceNodesAsInAContainerTheNodeIsMade() throws Exception {
        // A /dev of the container's own: no loop-control, no loop nodes. The device is the lowest
        // free one sysfs shows; its node is made with the number sysfs gives.
        Path containerDev = Files.createDirectory(dir.resolve("dev"));
        SystemState.run("losetup", "--find"); // has the kernel add a free device if there is none
        LoopDevices contained = new SystemLoopDevices(kernel, Path.of("/sys/block"), containerDev, true);
        Path image = Images.sparse(dir.resolve("a.img"));

        LoopDevice device = contained.attach(image);
        assertEquals(containerDev, device.device().getParent());
        assertEquals("block special file " + device.number().major() + ":" + device.number().minor() + " 600",
                SystemState.run("stat", "--format=%F %Hr:%Lr %a", device.device().toString()).strip());
        Path hostNode = Path.of("/dev").resolve(device.device().getFileName());
        assertEquals(List.of(hostNode.toString()), SystemState.loopDevicesOf(image));

        contained.detach(device.device());
        assertEquals(List.of(), SystemState.loopDevicesOf(image));
    }

    @Test
    void aDeviceThisProcessMayNotOpenIsNoneOfItsOwn() throws Exception {
        Path image = Images.sparse(dir.resolve("a.img"));
        LoopDevice attached = loops.attach(image);
        // A /dev this process may not open devices from (nodev, as a container's device rules
        // refuse them), with a node for the attached device: listing passes it by, without failing.
        Path nodev = Files.createDirectory(dir.resolve("nodev"));
        mounter.mount("strata-test", nodev, "tmpfs", List.of("size=1m", "nodev"));
        SystemState.run("mknod", nodev.resolve(attached.device().getFileName()).toString(), "b",
                String.valueOf(attached.number().major()), String.valueOf(attached.number().minor()));
        LoopDevices fenced = new SystemLoopDevices(kernel, Path.of("/sys/block"), nodev, true);

        assertTrue(loops.list().contains(attached));
        assertFalse(fenced.list().stream().anyMatch(device -> device.backingFile().equals(attached.backingFile())));
        loops.detach(attached.device());
    }

    @Test
    void aFailedAttachSaysWhichCallFailedAndWhy() throws Exception {
        Path image = Images.sparse(dir.resolve("a.img"));
        Path noDevices = Files.createDirectory(dir.resolve("empty"));
        // sysfs with no loop devices at all, and no loop-control: nothing to attach to.
        LoopDevices none = new SystemLoopDevices(kernel, noDevices, noDevices, true);
        DeviceException e = assertThrows(DeviceException.class, () -> none.attach(image));
        assertEquals("cannot attach " + image + ": every loop device is in use, and there is no "
                + noDevices.resolve("loop-control") + " to add one", e.getMessage());
    }

    @Test
    void fallsBackToBufferedIoOnAFilesystemWithoutDirectIo() throws Exception {
        Path image = ramfsImage();
        LoopDevice device = loops.attach(image);
        assertFalse(device.directIo());
        assertEquals(List.of("0"), losetup(device.device(), "DIO"));
        assertEquals(Optional.of(device), loops.find(image));
        assertEquals(1024 * 1024, loops.sizeBytes(device.device()));
    }

    @Test
    void aDeletedImageStaysListedUnderItsOldPathButIsNotFound() throws Exception {
        Path image = Images.sparse(dir.resolve("a.img"));
        LoopDevice device = loops.attach(image);
        Files.delete(image);

        LoopDevice listed = loops.list().stream().filter(d -> d.device().equals(device.device())).findFirst().orElseThrow();
        assertTrue(listed.deleted(), "sysfs now says \"" + image + " (deleted)\"");
        assertEquals(device.backing(), listed.backing());
        assertEquals(Optional.empty(), loops.find(image));
        Images.sparse(image);
        assertEquals(Optional.empty(), loops.find(image), "a new file at the same path is another image");

        loops.detach(device.device());
        assertFalse(loops.list().contains(listed));
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

        // LOOP_CLR_FD left the kernel's autoclear flag: the last close detaches it.
        mounter.unmount(mnt);
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (loops.find(image).isPresent() && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(Optional.empty(), loops.find(image));
    }

    @Test
    void findsADeviceAttachedInAMountNamespaceThatIsGone() throws Exception {
        // As a container restart leaves it: the device was attached through a bind mount of the
        // directory in a namespace that has since died, so sysfs names the image "/a.img".
        Path image = Images.sparse(dir.resolve("a.img"));
        Path elsewhere = Files.createDirectory(dir.resolve("elsewhere"));
        String device = SystemState.run("unshare", "--mount", "--propagation", "private", "sh", "-c",
                "mount --bind " + dir + " " + elsewhere + " && losetup --find --show " + elsewhere + "/a.img").strip();
        assertTrue(device.startsWith("/dev/loop"), device);
        assertEquals(List.of("/a.img"), losetup(Path.of(device), "BACK-FILE"));

        LoopDevice found = loops.find(image).orElseThrow();
        assertEquals(Path.of(device), found.device());
        assertEquals(Path.of("/a.img"), found.backingFile());
        assertEquals(Optional.empty(), loops.find(Images.sparse(dir.resolve("b.img"))));
        loops.detach(found.device());
        assertEquals(List.of(), SystemState.loopDevicesOf(image));
    }

    /** dev:ino of {@code file} as stat(1) prints them, in the form FileIdentity prints itself. */
    private static String statIdentity(Path file) throws Exception {
        String[] fields = SystemState.run("stat", "--format", "%Hd %Ld %i", file.toString()).strip().split(" ");
        return fields[0] + ":" + fields[1] + "/" + fields[2];
    }

    /** ramfs cannot open files for direct I/O, so a loop device on it must do without. */
    private Path ramfsImage() throws Exception {
        Path ramfs = Files.createDirectory(dir.resolve("ramfs"));
        mounter.mount("strata-test", ramfs, "ramfs", List.of());
        return Files.write(ramfs.resolve("a.img"), new byte[1024 * 1024]);
    }

    /** losetup's view of one device, the given columns, one line per device. */
    private static List<String> losetup(Path device, String columns) throws Exception {
        return SystemState.run("losetup", "--list", "--noheadings", "--raw", "--output", columns, device.toString())
                .lines().map(String::strip).toList();
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
