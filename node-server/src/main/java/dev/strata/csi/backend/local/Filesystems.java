package dev.strata.csi.backend.local;

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
     * Creates a filesystem of {@code fsType} (ext4, xfs or btrfs) on {@code device}. Refuses a
     * device that holds anything {@link #probe} recognises: data is never formatted away.
     *
     * @throws UnsupportedFilesystemException for any other type
     */
    void format(Path device, String fsType) throws DeviceException;
}
