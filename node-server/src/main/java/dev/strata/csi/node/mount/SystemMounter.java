package dev.strata.csi.node.mount;

import dev.strata.csi.linux.Kernel;
import dev.strata.csi.linux.SyscallException;
import dev.strata.csi.mount.MountCommand;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.Commands;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Pattern;
import jnr.constants.platform.Errno;

/**
 * {@link Mounter} with mount(2) and umount2(2), as util-linux's mount(8) and umount(8) would call
 * them (see {@link MountFlags} for how options map), without starting a process per mount. A
 * filesystem type that has a mount helper (nfs, cifs, ...) is mounted and unmounted with mount(8)
 * and umount(8), which run the helper; every path and source then follows {@code --}, so none can
 * be read as an option.
 */
public final class SystemMounter implements Mounter {

    /** Mounting a disk filesystem can replay a journal; a hung network mount must still end. */
    private static final Duration TIMEOUT = Duration.ofMinutes(2);

    private static final Pattern FS_TYPE = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]*");

    /** The per-mount flags a bind mount has, which a remount must repeat or the kernel clears them. */
    private static final List<String> KEPT_ON_REMOUNT = List.of("nosuid", "nodev", "noexec", "nosymfollow");

    private final Kernel kernel;
    private final Commands commands;
    private final MountHelpers helpers;

    public SystemMounter(Kernel kernel, Commands commands, MountHelpers helpers) {
        this.kernel = kernel;
        this.commands = commands;
        this.helpers = helpers;
    }

    @Override
    public void mount(String source, Path target, String fsType, List<String> options) throws MountException {
        if (source.isEmpty() || source.chars().anyMatch(Character::isISOControl)) {
            throw new MountException("mount source \"" + CsiException.printable(source) + "\" is empty or holds control characters");
        }
        if (!FS_TYPE.matcher(fsType).matches()) {
            throw new MountException("filesystem type \"" + CsiException.printable(fsType) + "\" is not a plain name");
        }
        String where = absolute(target);
        String what = "mount " + source + " on " + target;
        if (helpers.mount(fsType)) {
            run(what, MountCommand.argv(fsType, options, source, where));
            return;
        }
        MountFlags flags = MountFlags.of(options);
        try {
            kernel.mount(source, where, fsType, flags.flags(), flags.data());
        } catch (SyscallException e) {
            throw new MountException(what + ": " + mountError(e, source, target, fsType), e);
        }
        for (long propagation : flags.propagation()) {
            try {
                kernel.mount(null, where, null, propagation, null);
            } catch (SyscallException e) {
                undo(what + ": cannot set its propagation: " + e.getMessage(), target, e);
            }
        }
    }

    @Override
    public void bindMount(Path source, Path target, boolean readOnly) throws MountException {
        String where = absolute(target);
        try {
            kernel.mount(absolute(source), where, null, MountFlags.MS_BIND, null);
        } catch (SyscallException e) {
            throw new MountException("bind mount " + source + " on " + target + ": " + bindError(e, source, target), e);
        }
        if (!readOnly) {
            return;
        }
        // The kernel takes the read-only flag for a bind mount only on a remount, so there is a
        // moment in which the bind is writable; it is never left that way. The remount sets every
        // per-mount flag anew, so those the bind took from its source are repeated (the atime
        // flags the kernel keeps by itself), as mount -o remount,bind,ro does.
        String what = "make bind mount " + target + " read-only";
        MountPoint bind = table().at(target).orElse(null);
        if (bind == null) {
            throw new MountException(what + ": the bind mount is gone from the mount table");
        }
        long flags = MountFlags.MS_REMOUNT | MountFlags.MS_BIND | MountFlags.MS_RDONLY;
        for (String kept : KEPT_ON_REMOUNT) {
            if (bind.options().contains(kept)) {
                flags |= MountFlags.of(List.of(kept)).flags();
            }
        }
        try {
            kernel.mount(null, where, null, flags, null);
        } catch (SyscallException e) {
            undo(what + ": " + e.getMessage(), target, e);
        }
        if (!table().at(target).map(MountPoint::readOnly).orElse(false)) {
            undo("bind mount " + target + " is still writable after the read-only remount", target, null);
        }
    }

    @Override
    public void unmount(Path target) throws MountException {
        MountPoint top = table().at(target).orElse(null);
        if (top == null) {
            return;
        }
        String where = absolute(target);
        try {
            if (helpers.umount(top.fsType())) {
                run("umount " + target, "umount", "--", where);
            } else {
                try {
                    kernel.umount(where);
                } catch (SyscallException e) {
                    throw new MountException("umount " + target + ": " + umountError(e), e);
                }
            }
        } catch (MountException e) {
            // Someone else may have unmounted it since the table was read: that is success too.
            if (table().isMountPoint(target)) {
                throw e;
            }
        }
    }

    @Override
    public MountTable table() throws MountException {
        return MountTable.read();
    }

    /** Takes off the mount just made at {@code target} and fails with {@code message}. */
    private void undo(String message, Path target, Exception cause) throws MountException {
        try {
            kernel.umount(absolute(target));
        } catch (SyscallException undo) {
            throw new MountException(message + "; and undoing the mount failed: umount " + target + ": " + umountError(undo), cause);
        }
        throw new MountException(message, cause);
    }

    /** Why mount(2) failed, in the words mount(8) would use where the errno alone is vague. */
    private static String mountError(SyscallException e, String source, Path target, String fsType) {
        String errno = e.reason();
        if (e.is(Errno.ENOENT)) {
            return !Files.isDirectory(target) ? "mount point " + target + " does not exist: " + errno
                    : source.startsWith("/") && !Files.exists(Path.of(source)) ? "source " + source + " does not exist: " + errno
                    : errno;
        }
        if (e.is(Errno.ENODEV)) {
            return "unknown filesystem type \"" + fsType + "\": " + errno;
        }
        if (e.is(Errno.ENOTBLK)) {
            return source + " is not a block device: " + errno;
        }
        if (e.is(Errno.ENXIO)) {
            return source + " is not a valid block device: " + errno;
        }
        if (e.is(Errno.EINVAL)) {
            return "wrong filesystem type, bad option or bad superblock on " + source + " (the kernel log says which): " + errno;
        }
        if (e.is(Errno.EBUSY)) {
            return source + " is already mounted or " + target + " is busy: " + errno;
        }
        if (e.is(Errno.EROFS)) {
            return source + " is write-protected and cannot be mounted read-write: " + errno;
        }
        if (e.is(Errno.EACCES)) {
            return "permission denied for " + source + " (write-protected, or a device node on a nodev mount): " + errno;
        }
        if (e.is(Errno.ENOTDIR)) {
            return "mount point " + target + " is not a directory: " + errno;
        }
        return errno;
    }

    private static String bindError(SyscallException e, Path source, Path target) {
        String errno = e.reason();
        if (e.is(Errno.ENOENT)) {
            return (!Files.exists(source) ? source : target) + " does not exist: " + errno;
        }
        if (e.is(Errno.ENOTDIR)) {
            return "one of " + source + " and " + target + " is a directory and the other is not: " + errno;
        }
        return errno;
    }

    private static String umountError(SyscallException e) {
        String errno = e.reason();
        if (e.is(Errno.EBUSY)) {
            return "target is busy (files open or mounts below it): " + errno;
        }
        if (e.is(Errno.EINVAL)) {
            return "not a mount point: " + errno;
        }
        return errno;
    }

    private void run(String what, String... argv) throws MountException {
        try {
            commands.run(TIMEOUT, argv).check(what);
        } catch (CommandException e) {
            throw new MountException(e.getMessage(), e);
        }
    }

    private static String absolute(Path path) {
        return path.toAbsolutePath().normalize().toString();
    }
}
