package dev.strata.csi.node.local;

import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountPoint;
import java.nio.file.Path;

/**
 * A loop device and the image file behind it.
 *
 * @param backingFile the image as the kernel names it, for people: relative to the mount namespace
 *                    that attached the device, so never used to tell which image it is
 * @param backing     which image it is: the backing file's device and inode numbers
 * @param deleted     whether the backing file has been unlinked since it was attached
 * @param directIo    whether the device reads and writes the image with direct I/O, bypassing
 *                    the page cache of the filesystem that holds the image (no double caching)
 */
public record LoopDevice(Path device, Path backingFile, FileIdentity backing, boolean deleted, DeviceNumber number,
        boolean directIo) implements AttachedDevice {

    /**
     * Whether {@code mount} uses this device: a filesystem on it (its source is the device, or its
     * device number is, except for btrfs, which reports an anonymous number), or a bind mount of
     * the device node itself, as a published block volume is: that mount's root is the node's
     * name in /dev, a devtmpfs (or, in a container with its own /dev, a tmpfs).
     */
    @Override
    public DeviceNumber deviceNumber() {
        return number;
    }

    @Override
    public boolean backs(MountPoint mount) {
        return mount.source().equals(device.toString())
                || mount.device().equals(number)
                || ((mount.fsType().equals("devtmpfs") || mount.fsType().equals("tmpfs"))
                        && mount.root().equals("/" + device.getFileName()));
    }
}
