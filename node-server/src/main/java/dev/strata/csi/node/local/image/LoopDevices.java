package dev.strata.csi.node.local.image;

import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/** Attaches image files as block devices. */
public interface LoopDevices {

    /** Attaches {@code image} to a free loop device, with direct I/O when the filesystem holding it allows. */
    LoopDevice attach(Path image) throws DeviceException;

    /**
     * Detaches {@code device} (a {@code /dev/loopN}); nothing to do if it is not attached. Fails
     * while the device is in use (mounted, held open): the kernel then detaches it on last close.
     */
    void detach(Path device) throws DeviceException;

    /**
     * The device {@code image} is attached to, if any (the lowest numbered if several), told by
     * the backing file's identity, which is the same in every mount namespace.
     */
    default Optional<LoopDevice> find(Path image) throws DeviceException {
        Optional<FileIdentity> identity;
        try {
            identity = FileIdentity.ofExisting(image);
        } catch (IOException e) {
            throw new DeviceException("cannot stat " + image + ": " + e.getMessage(), e);
        }
        if (identity.isEmpty()) {
            return Optional.empty();
        }
        return list().stream().filter(device -> device.backing().equals(identity.get())).findFirst();
    }

    /**
     * The devices stacked on the attached loop device, by number (its holders in sysfs): the
     * dm-crypt mapping of an encrypted volume, on which its filesystem is mounted.
     */
    List<DeviceNumber> holders(LoopDevice device) throws DeviceException;

    /** Every attached loop device, by number. */
    List<LoopDevice> list() throws DeviceException;

    /** The size of {@code device} in bytes, as the kernel sees it. */
    long sizeBytes(Path device) throws DeviceException;

    /**
     * Makes {@code device} take the current size of its backing file (LOOP_SET_CAPACITY): a grown
     * image shows its new size without a detach, while mounted and in use.
     */
    void refreshCapacity(Path device) throws DeviceException;
}
