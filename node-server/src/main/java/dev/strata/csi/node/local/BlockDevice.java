package dev.strata.csi.node.local;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountPoint;
import java.nio.file.Path;

/**
 * A block device a volume lives on or is staged from: a loop device, a logical volume's
 * device-mapper device, or the dm-crypt mapping over either for an encrypted volume.
 */
public interface BlockDevice {

    /** The device node, as it is mounted and published from. */
    Path device();

    /** The device's number, by which mounts are matched and cgroups limit its IO. */
    DeviceNumber deviceNumber();

    /**
     * Whether {@code mount} uses this device: a filesystem on it (its source is the device, or its
     * device number is, except for btrfs, which reports an anonymous number), or a bind mount of
     * the device node itself, as a published block volume is: that mount's root is the node's
     * name in /dev, a devtmpfs (or, in a container with its own /dev, a tmpfs).
     */
    default boolean backs(MountPoint mount) {
        return mount.source().equals(device().toString())
                || mount.device().equals(deviceNumber())
                || ((mount.fsType().equals("devtmpfs") || mount.fsType().equals("tmpfs"))
                        && mount.root().equals("/" + device().getFileName()));
    }
}
