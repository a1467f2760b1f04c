package dev.strata.csi.node.local.fs;

import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;
import java.util.Optional;

/** Finds out what a block device holds and creates filesystems on blank ones. */
public interface Filesystems {

    /**
     * What {@code device} holds: a filesystem type such as {@code ext4}, a partition table type
     * such as {@code gpt}, or empty if it is blank as far as any known signature goes.
     */
    Optional<String> probe(Path device) throws DeviceException;

    /**
     * Creates a filesystem of {@code fsType} (ext4, xfs or btrfs) on {@code device} if it is blank.
     * A device that holds anything {@link #probe} recognises is left as it is: data is never
     * formatted away.
     *
     * @return what the device already held, or empty when it was blank and now holds {@code fsType}
     * @throws UnsupportedFilesystemException for any other type
     */
    Optional<String> formatIfBlank(Path device, String fsType) throws DeviceException;

    /**
     * Grows the {@code fsType} filesystem on {@code device}, mounted at {@code mountPoint}, to fill
     * the device, online: resize2fs for ext4, xfs_growfs for xfs, {@code btrfs filesystem resize
     * max} for btrfs. A filesystem that fills the device already is left as it is.
     */
    void grow(Path device, Path mountPoint, String fsType) throws DeviceException;
}
