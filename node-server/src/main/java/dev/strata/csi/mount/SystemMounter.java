package dev.strata.csi.mount;

import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.Commands;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

/**
 * {@link Mounter} with util-linux mount(8) and umount(8). Every path and source follows
 * {@code --}, so none can be read as an option.
 */
public final class SystemMounter implements Mounter {

    /** Mounting a disk filesystem can replay a journal; a hung network mount must still end. */
    private static final Duration TIMEOUT = Duration.ofMinutes(2);

    private static final Pattern FS_TYPE = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]*");

    private final Commands commands;

    public SystemMounter(Commands commands) {
        this.commands = commands;
    }

    @Override
    public void mount(String source, Path target, String fsType, List<String> options) throws MountException {
        if (source.isEmpty() || source.chars().anyMatch(Character::isISOControl)) {
            throw new MountException("mount source \"" + CsiException.printable(source) + "\" is empty or holds control characters");
        }
        if (!FS_TYPE.matcher(fsType).matches()) {
            throw new MountException("filesystem type \"" + CsiException.printable(fsType) + "\" is not a plain name");
        }
        List<String> argv = new ArrayList<>(List.of("mount", "-t", fsType));
        if (!options.isEmpty()) {
            argv.addAll(List.of("-o", MountOptions.join(options)));
        }
        argv.addAll(List.of("--", source, absolute(target)));
        run("mount " + source + " on " + target, argv.toArray(String[]::new));
    }

    @Override
    public void bindMount(Path source, Path target, boolean readOnly) throws MountException {
        String where = absolute(target);
        run("bind mount " + source + " on " + target, "mount", "--bind", "--", absolute(source), where);
        if (!readOnly) {
            return;
        }
        // The kernel takes the read-only flag for a bind mount only on a remount, so there is a
        // moment in which the bind is writable; it is never left that way.
        try {
            run("make bind mount " + target + " read-only", "mount", "-o", "remount,bind,ro", "--", where);
            if (!table().at(target).map(MountPoint::readOnly).orElse(false)) {
                throw new MountException("bind mount " + target + " is still writable after the read-only remount");
            }
        } catch (MountException e) {
            try {
                run("undo bind mount " + target, "umount", "--", where);
            } catch (MountException undo) {
                throw new MountException(e.getMessage() + "; and undoing the writable bind failed: " + undo.getMessage(), e);
            }
            throw e;
        }
    }

    @Override
    public void unmount(Path target) throws MountException {
        if (!table().isMountPoint(target)) {
            return;
        }
        try {
            run("umount " + target, "umount", "--", absolute(target));
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
