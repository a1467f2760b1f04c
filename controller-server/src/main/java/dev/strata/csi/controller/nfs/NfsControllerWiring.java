package dev.strata.csi.controller.nfs;

import dev.strata.csi.backend.nfs.NfsMounter;
import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.server.DriverProgram;
import dev.strata.csi.system.Command;
import dev.strata.csi.controller.local.LocalCrashPoint;
import dev.strata.csi.system.Crashes;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;

/**
 * The NFS backend of controller-server, put together from its flags: the exports it finds or
 * mounts under --nfs-export-root, their project quotas, and the removal, at start, of the partial
 * copies a crash left there. ControllerServer names it in one line.
 */
public final class NfsControllerWiring {

    public static final Flag EXPORT_ROOT = Flag.of("nfs-export-root", "/var/lib/strata/exports",
            "where controller-server finds NFS exports: server:/share at <root>/<server>/<share>, mounted there by a person "
                    + "or by the pod spec, or by controller-server itself (--nfs-mount-exports)");
    public static final Flag MOUNT_EXPORTS = Flag.bool("nfs-mount-exports", true,
            "mount an export under --nfs-export-root when nothing is mounted there (needs mount.nfs and CAP_SYS_ADMIN); "
                    + "false: use only exports mounted there already");
    public static final Flag NFS_TIMEOUT = Flag.of("nfs-timeout", "60s",
            "deadline for one step on an NFS export (mount, make or remove a directory); past it the call gets UNAVAILABLE;"
                    + " a change of a volume's record waits up to half of it for the record's lock, then gets ABORTED");

    private NfsControllerWiring() {}

    public static List<Flag> flags() {
        return List.of(EXPORT_ROOT, MOUNT_EXPORTS, NFS_TIMEOUT);
    }

    /** The backend; a thread of its own removes the partial copies a crash left, so a slow export never holds up the start. */
    public static NfsController fromFlags(DriverProgram.Context context) throws UsageException {
        var flags = context.flags();
        var log = context.log();
        Duration nfsTimeout = flags.durationValue(NFS_TIMEOUT);
        Kernel kernel = new Kernel();
        Exports exports = new Exports(Path.of(flags.get(EXPORT_ROOT)), flags.booleanValue(MOUNT_EXPORTS),
                new NfsMounter(new Command(), nfsTimeout, log), new NfsExportMetrics(context.metrics()), kernel, log);
        Crashes<NfsCrashPoint> crashes = Crashes.fromEnvironment(NfsCrashPoint.class, LocalCrashPoint.names(), log);
        NfsController nfs = new NfsController(exports, new SystemProjectQuotas(kernel), nfsTimeout, Clock.systemUTC(), crashes, log);
        Thread.ofPlatform().daemon().name("nfs-partial-copies").start(() -> {
            try {
                nfs.removePartialCopies();
            } catch (Exception e) { // an export not answering: the retries remove their own copies
                log.warn("cannot remove partial NFS copies at start", "error", e.getMessage());
            }
        });
        return nfs;
    }
}
