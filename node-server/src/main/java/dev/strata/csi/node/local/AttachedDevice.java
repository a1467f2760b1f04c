package dev.strata.csi.node.local;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountPoint;
import java.nio.file.Path;

/** The block device of an attached volume on this node: a loop device, or a logical volume's device-mapper device. */
public interface AttachedDevice {

    /** The device node, as it is mounted and published from. */
    Path device();

    /** The device's number, by which cgroups limit its IO. */
    DeviceNumber deviceNumber();

    /** Whether {@code mount} uses this device: a filesystem on it, or a bind mount of its node (a block volume). */
    boolean backs(MountPoint mount);
}
