package dev.strata.csi.mount;

import java.nio.file.Path;
import java.util.List;

/** Mounts and unmounts filesystems; target directories must exist. */
public interface Mounter {

    /** Mounts {@code source} (a device, or a server:path for network filesystems) of type {@code fsType} on {@code target}. */
    void mount(String source, Path target, String fsType, List<String> options) throws MountException;

    /**
     * Makes {@code source} appear at {@code target} as well. A read-only bind never stays mounted
     * writable: if it cannot be made read-only, it is undone.
     */
    void bindMount(Path source, Path target, boolean readOnly) throws MountException;

    /** Removes the mount on top at {@code target}; nothing to do if nothing is mounted there. */
    void unmount(Path target) throws MountException;

    MountTable table() throws MountException;
}
