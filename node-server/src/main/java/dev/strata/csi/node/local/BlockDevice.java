package dev.strata.csi.node.local;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountPoint;
import java.nio.file.Path;
import java.util.List;

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
     * the device node itself, as a published block volume is ({@link #bindsNode}).
     */
    default boolean backs(MountPoint mount) {
        return mount.source().equals(device().toString())
                || mount.device().equals(deviceNumber())
                || bindsNode(mount, List.of(device().getFileName().toString()));
    }

    /**
     * Whether {@code mount} is a bind mount of a device node named one of {@code names} (paths
     * relative to /dev): mountinfo gives such a mount the device number of the filesystem /dev is
     * (a devtmpfs; in a container with a /dev of its own, a tmpfs), not the device's, and as its
     * root the node's path in that filesystem, with "//deleted" after it once the node was
     * unlinked (device-mapper nodes are, when a volume is deactivated and activated again).
     */
    static boolean bindsNode(MountPoint mount, List<String> names) {
        if (!mount.fsType().equals("devtmpfs") && !mount.fsType().equals("tmpfs")) {
            return false;
        }
        String root = mount.root().endsWith(DELETED) ? mount.root().substring(0, mount.root().length() - DELETED.length()) : mount.root();
        return names.stream().anyMatch(name -> !name.isEmpty() && root.equals("/" + name));
    }

    /** What mountinfo puts after the root of a mount whose file was unlinked. */
    String DELETED = "//deleted";
}
