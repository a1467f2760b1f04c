package dev.strata.csi.backend.nfs;

import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountCommand;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.Commands;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * Mounts and unmounts NFS shares with mount(8) and umount(8): an NFS mount needs mount.nfs
 * (nfs-common), which resolves the server, negotiates the version and retries, so it is never made
 * with a bare mount(2). Every wait is bounded, so a server that does not answer costs a caller
 * time, never a thread of the driver forever.
 */
public final class NfsMounter {

    /** The file system type mount(8) is given; the version comes from the options (nfsvers=3, nfsvers=4.1). */
    public static final String FS_TYPE = "nfs";

    private final Commands commands;
    private final Duration timeout;
    private final Log log;

    /** @param timeout how long one mount or one unmount attempt may take before it is given up */
    public NfsMounter(Commands commands, Duration timeout, Log log) {
        this.commands = commands;
        this.timeout = timeout;
        this.log = log;
    }

    /** Whether a mount is of an NFS share (the kernel lists nfs for v2/v3 and nfs4 for v4.x). */
    public static boolean isNfs(MountPoint mount) {
        return mount.fsType().equals("nfs") || mount.fsType().equals("nfs4");
    }

    public void mount(NfsVolume volume, Path target, List<String> options) throws MountException {
        run("mount " + volume.source() + " on " + target, timeout,
                List.of(MountCommand.argv(FS_TYPE, options, volume.source(), target.toString())));
    }

    /**
     * Unmounts the mount on top at {@code target}. A server that does not answer keeps a plain
     * unmount waiting, so after a failed or timed-out attempt the unmount is forced (pending requests
     * to the server are aborted), and if that fails too it is made lazy: the mount leaves the tree
     * now and the kernel lets go of it when its last user does. Nothing of the node's own is lost
     * that way: the data lives on the server. The path is never resolved (--no-canonicalize), since
     * resolving a path on a dead mount hangs. The three attempts share one timeout (a half, a
     * quarter, a quarter), so an unmount answers within it; the lazy one never waits for the server.
     */
    public void unmount(Path target) throws MountException {
        String where = target.toString();
        Duration quarter = timeout.dividedBy(4);
        try {
            run("umount " + where, timeout.minus(quarter).minus(quarter), List.of("umount", "--no-canonicalize", "--", where));
            return;
        } catch (MountException plain) {
            log.warn("NFS unmount failed; forcing it", "path", where, "error", plain.getMessage());
        }
        try {
            run("umount --force " + where, quarter, List.of("umount", "--no-canonicalize", "--force", "--", where));
            return;
        } catch (MountException forced) {
            log.warn("forced NFS unmount failed; detaching it lazily", "path", where, "error", forced.getMessage());
        }
        run("umount --lazy " + where, quarter, List.of("umount", "--no-canonicalize", "--lazy", "--", where));
    }

    private void run(String what, Duration limit, List<String> argv) throws MountException {
        try {
            commands.run(limit, argv.toArray(String[]::new)).check(what);
        } catch (CommandException e) {
            throw new MountException(e.getMessage(), e);
        }
    }
}
