package dev.strata.csi.node.nfs;

import dev.strata.csi.backend.nfs.NfsMounter;
import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.server.DriverProgram;
import dev.strata.csi.system.Command;
import java.time.Duration;
import java.util.List;

/**
 * The NFS backend of node-server, put together from its flag: mount.nfs and the probes of a
 * mounted share, both with the --nfs-timeout deadline. NodeServer names it in one line.
 */
public final class NfsNodeWiring {

    public static final Flag NFS_TIMEOUT = Flag.of("nfs-timeout", "60s",
            "deadline for one NFS mount, for one unmount with its forced and lazy retries, and for each stat, statfs or chmod of a share (a child process killed at it)");

    private NfsNodeWiring() {}

    public static List<Flag> flags() {
        return List.of(NFS_TIMEOUT);
    }

    public static NfsNodeBackend fromFlags(DriverProgram.Context context, Command commands, Mounter mounter) throws UsageException {
        Duration nfsTimeout = context.flags().durationValue(NFS_TIMEOUT);
        return new NfsNodeBackend(mounter, new NfsMounter(commands, nfsTimeout, context.log()), new NfsProbe(commands, nfsTimeout),
                context.log());
    }
}
