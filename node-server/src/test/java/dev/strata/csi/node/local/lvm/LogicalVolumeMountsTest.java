package dev.strata.csi.node.local.lvm;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.node.local.image.LoopDevice;
import dev.strata.csi.node.local.lvm.LogicalVolumes.LogicalVolume;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * Which mounts are a logical volume's (LogicalVolume.backs), as mountinfo shows them: unpublish
 * and unstage take off only those, and detach and delete refuse while one is there. A published
 * block volume is a bind mount of the device node, which mountinfo gives the device number of /dev's
 * filesystem and the node's path in it as root: /dm-N where udev made the nodes, /mapper/<name>
 * where LVM did without udev (a container, the test VM), each with "//deleted" once the node was
 * unlinked. The data-path benchmark's NodeUnpublishVolume refused the second as someone else's.
 */
class LogicalVolumeMountsTest {

    /** devtmpfs's own device number, which a bind of a node in it reports. */
    private static final DeviceNumber DEVTMPFS = new DeviceNumber(0, 5);
    private static final Path TARGET = Path.of("/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-1/pod");

    private static final LogicalVolume ACTIVE = new LogicalVolume("pvc-1", 64L << 20, true, true,
            Path.of("/dev/mapper/strata--vg-pvc--1"), Optional.of(new DeviceNumber(253, 4)));

    private static MountPoint mount(DeviceNumber device, String root, String fsType, String source) {
        return new MountPoint(40, 30, device, root, TARGET, List.of("rw"), fsType, source, List.of("rw"));
    }

    private static MountPoint bind(String root) {
        return mount(DEVTMPFS, root, "devtmpfs", "udev");
    }

    @Test
    void aFilesystemOnTheVolumeIsItsByDeviceOrSource() {
        assertTrue(ACTIVE.backs(mount(new DeviceNumber(253, 4), "/", "ext4", "/dev/mapper/strata--vg-pvc--1")));
        assertTrue(ACTIVE.backs(mount(new DeviceNumber(253, 4), "/", "ext4", "/dev/dm-4")), "by its number, whatever the source says");
        assertTrue(ACTIVE.backs(mount(new DeviceNumber(0, 57), "/", "btrfs", "/dev/mapper/strata--vg-pvc--1")),
                "btrfs reports an anonymous number: by its source");
        assertFalse(ACTIVE.backs(mount(new DeviceNumber(253, 5), "/", "ext4", "/dev/mapper/strata--vg-pvc--2")));
    }

    @Test
    void aBlockBindIsTheVolumesByItsNodesNameInDev() {
        assertTrue(ACTIVE.backs(bind("/dm-4")), "udev: /dev/mapper/<name> and /dev/<group>/<name> link to /dev/dm-4");
        assertTrue(ACTIVE.backs(bind("/mapper/strata--vg-pvc--1")), "no udev: LVM made the node in /dev/mapper itself");
        assertTrue(ACTIVE.backs(mount(new DeviceNumber(0, 63), "/mapper/strata--vg-pvc--1", "tmpfs", "tmpfs")),
                "a container's /dev of its own, a tmpfs");
        assertTrue(ACTIVE.backs(bind("/mapper/strata--vg-pvc--1//deleted")), "the node was unlinked and made again since the bind");
        assertTrue(ACTIVE.backs(bind("/dm-4//deleted")));
    }

    @Test
    void anotherNodesBindIsNot() {
        assertFalse(ACTIVE.backs(bind("/dm-5")), "another device-mapper device");
        assertFalse(ACTIVE.backs(bind("/dm-44")));
        assertFalse(ACTIVE.backs(bind("/mapper/strata--vg-pvc--10")), "a volume whose name begins with this one's");
        assertFalse(ACTIVE.backs(bind("/mapper/strata--vg-pvc--1-real")));
        assertFalse(ACTIVE.backs(bind("/strata--vg-pvc--1")), "the same file name elsewhere in /dev");
        assertFalse(ACTIVE.backs(bind("/null")));
        assertFalse(ACTIVE.backs(bind("/")), "all of /dev bound there");
        assertFalse(ACTIVE.backs(mount(new DeviceNumber(8, 1), "/mapper/strata--vg-pvc--1", "ext4", "/dev/sda1")),
                "a directory of that name on a disk's filesystem, bound there");
        assertFalse(ACTIVE.backs(bind("/mapper/strata--vg-pvc--1/deleted")), "not the kernel's mark of an unlinked node");
    }

    @Test
    void anInactiveVolumeHasNoDmNode() {
        LogicalVolume inactive = new LogicalVolume("pvc-1", 64L << 20, true, false, Path.of("/dev/mapper/strata--vg-pvc--1"),
                Optional.empty());
        assertFalse(inactive.backs(bind("/dm-4")), "no device number: no dm-N of its own");
        assertTrue(inactive.backs(bind("/mapper/strata--vg-pvc--1//deleted")), "its node, unlinked at deactivation, still bound");
    }

    @Test
    void aLoopDeviceIsMatchedByItsOwnName() {
        LoopDevice loop = new LoopDevice(Path.of("/dev/loop3"), Path.of("/var/lib/strata/pool/pvc-2.img"),
                new FileIdentity(new DeviceNumber(8, 1), 12), false, new DeviceNumber(7, 3), true);
        assertTrue(loop.backs(bind("/loop3")));
        assertTrue(loop.backs(bind("/loop3//deleted")));
        assertFalse(loop.backs(bind("/loop30")));
        assertFalse(loop.backs(bind("/mapper/loop3")));
    }
}
