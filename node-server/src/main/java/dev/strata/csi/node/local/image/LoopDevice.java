package dev.strata.csi.node.local.image;

import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.node.local.BlockDevice;
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
        boolean directIo) implements BlockDevice {

    @Override
    public DeviceNumber deviceNumber() {
        return number;
    }
}
