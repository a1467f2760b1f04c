package dev.strata.csi.node.mount;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountTable;
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

    /**
     * Unmounts until nothing is mounted at {@code path}, taking each mount on top off with
     * {@code unmountTop}: the caller decides whether the mount is its to take off (and throws if
     * not), and how (a backend may need its own way for its mounts, e.g. NFS escalation). Bounded,
     * so a mount that keeps coming back fails the call instead of looping.
     */
    default void unmountAll(Path path, TopUnmount unmountTop) throws MountException {
        for (int i = 0; i < 8; i++) {
            var top = table().at(path);
            if (top.isEmpty()) {
                return;
            }
            unmountTop.unmount(top.get());
        }
        if (table().isMountPoint(path)) {
            throw new MountException(path + " is still mounted after 8 unmounts");
        }
    }

    /** Takes one mount, the one on top at its mount point, off. */
    @FunctionalInterface
    interface TopUnmount {
        void unmount(MountPoint top) throws MountException;
    }
}
