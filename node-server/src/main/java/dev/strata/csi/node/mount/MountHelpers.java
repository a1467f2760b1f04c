package dev.strata.csi.node.mount;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The helper programs mount(8) and umount(8) hand a filesystem type to ({@code mount.nfs},
 * {@code mount.cifs}, {@code umount.nfs}, ...), in the directories they look in. A type with a
 * helper needs what only the helper does (resolving a server, talking to it), so such a type is
 * mounted with mount(8) rather than with mount(2).
 */
public record MountHelpers(List<Path> dirs) {

    /** Where util-linux looks, in its order. */
    public static MountHelpers system() {
        return new MountHelpers(List.of(Path.of("/sbin"), Path.of("/sbin/fs.d"), Path.of("/sbin/fs")));
    }

    /** No helpers anywhere: every type is mounted with mount(2). */
    public static MountHelpers none() {
        return new MountHelpers(List.of());
    }

    public MountHelpers {
        dirs = List.copyOf(dirs);
    }

    public boolean mount(String fsType) {
        return exists("mount." + fsType);
    }

    public boolean umount(String fsType) {
        return exists("umount." + fsType);
    }

    private boolean exists(String program) {
        return dirs.stream().anyMatch(dir -> Files.isExecutable(dir.resolve(program)));
    }
}
