package dev.strata.csi.node.nfs;

import dev.strata.csi.backend.nfs.FileMode;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.mount.FilesystemUsage;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.system.Commands;
import java.nio.file.Path;
import java.time.Duration;

/**
 * Looks at paths on NFS mounts without ever blocking past a deadline. Any stat, statfs or chmod
 * of a path on a share whose server does not answer waits in the kernel (for a hard mount, until
 * the server is back); done by a thread of the driver, that thread would be lost for as long.
 * Each look is therefore a child process (stat(1), chmod(1)) killed at the deadline: NFS waits
 * are killable, so the kernel lets go of it and nothing of the driver stays behind.
 */
public final class NfsProbe {

    /** What a look at a path on a share found. */
    public enum Health {
        /** The server answered for the path. */
        ANSWERS,
        /** The server answered that it no longer knows the path's file handle (ESTALE): it restarted with another export. */
        STALE,
        /** The server did not answer within the deadline. */
        NOT_RESPONDING
    }

    /** A look that could not be made because the share is not healthy. */
    public static final class Unhealthy extends Exception {
        private final Health health;

        Unhealthy(Health health, String message) {
            super(message);
            this.health = health;
        }

        public Health health() {
            return health;
        }
    }

    private static final String STALE = "Stale file handle";

    private final Commands commands;
    private final Duration deadline;

    public NfsProbe(Commands commands, Duration deadline) {
        this.commands = commands;
        this.deadline = deadline;
    }

    /**
     * Whether the server answers for {@code path}; a failure other than ESTALE or silence is a
     * {@link MountException}. Asked with statfs, which the client always sends to the server: a
     * stat could be answered from the client's attribute cache.
     */
    public Health health(Path path) throws MountException {
        try {
            usage(path);
            return Health.ANSWERS;
        } catch (Unhealthy e) {
            return e.health();
        }
    }

    /** Space and inodes of the share mounted at {@code path}, as statfs(2) reports them (the figures df shows). */
    public FilesystemUsage usage(Path path) throws Unhealthy, MountException {
        String out = look("stat -f " + path, "stat", "--file-system", "--format=%S %b %f %a %c %d", "--", path.toString()).stdout().strip();
        String[] fields = out.split(" ");
        if (fields.length != 6) {
            throw new MountException("stat -f " + path + " printed '" + out + "', not six numbers");
        }
        try {
            long blockSize = Long.parseLong(fields[0]);
            long blocks = Long.parseLong(fields[1]);
            long free = Long.parseLong(fields[2]);
            long available = Long.parseLong(fields[3]);
            long inodes = Long.parseLong(fields[4]);
            long freeInodes = Long.parseLong(fields[5]);
            return new FilesystemUsage(blocks * blockSize, available * blockSize, (blocks - free) * blockSize,
                    inodes, freeInodes, inodes - freeInodes);
        } catch (NumberFormatException e) {
            throw new MountException("stat -f " + path + " printed '" + out + "', not six numbers");
        }
    }

    /** Sets the permission bits of {@code path} (the root of a share). */
    public void chmod(Path path, int mode) throws Unhealthy, MountException {
        look("chmod " + path, "chmod", FileMode.format(mode), "--", path.toString());
    }

    private CommandResult look(String what, String... argv) throws Unhealthy, MountException {
        CommandResult result;
        try {
            result = commands.run(deadline, argv);
        } catch (CommandException e) {
            if (e.timedOut()) {
                throw new Unhealthy(Health.NOT_RESPONDING, what + " got no answer within " + deadline.toMillis() + " ms");
            }
            throw new MountException(e.getMessage(), e);
        }
        if (result.succeeded()) {
            return result;
        }
        if (result.stderr().contains(STALE)) {
            throw new Unhealthy(Health.STALE, what + ": " + STALE);
        }
        try {
            result.check(what);
        } catch (CommandException e) {
            throw new MountException(e.getMessage(), e);
        }
        return result;
    }
}
