package dev.strata.csi.node.backend;

import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import java.nio.file.Path;
import java.util.function.Predicate;

/**
 * Unstage and unpublish take off the volume's own mounts at the path they are given, and nothing
 * else: a wrong path (a kubelet bug, a compromised sidecar) or a wrong volume id must not unmount
 * another volume's data or a filesystem a person mounted there. What is not the volume's is left
 * in place, FAILED_PRECONDITION, and the log says what it is.
 */
public final class OwnMounts {

    private OwnMounts() {
    }

    /**
     * Unmounts the mounts at {@code path} while the one on top is the volume's ({@code ours}),
     * each with {@code unmount}; stops at the first that is not.
     */
    public static void unmount(Mounter mounter, Log log, String volume, String field, Path path, Predicate<MountPoint> ours,
            Mounter.TopUnmount unmount) throws MountException {
        mounter.unmountAll(path, top -> {
            if (!ours.test(top)) {
                log.warn("left a mount that is not the volume's in place; unmount it by hand if it is stale", "volume", volume,
                        "path", path, "source", top.source(), "fs_type", top.fsType());
                throw CsiException.failedPrecondition(field + " " + path + " has " + top.source() + " (" + top.fsType()
                        + ") mounted, which is not volume " + volume + "'s; left in place for a person to look at");
            }
            unmount.unmount(top);
        });
    }
}
