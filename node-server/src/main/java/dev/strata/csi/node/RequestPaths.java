package dev.strata.csi.node;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;

/**
 * Staging and target paths from kubelet. They must be plain absolute paths: no '..', no '.', no
 * NUL, no doubled slashes, no longer than the kernel takes, and the path itself not a symlink; and they must lie below kubelet's
 * directory once the symlinks in their parents are resolved (the mount table names mounts by
 * their resolved path, and /var/lib/kubelet is a symlink on some hosts). Anything else is
 * INVALID_ARGUMENT and the driver touches nothing: a driver running as root on every node must not
 * turn a wrong path, from a kubelet bug or a compromised sidecar, into a mount over or the removal
 * of a system file. Nor may they lead into the driver's pool, or hold it: a mount there would
 * hide the volumes' images and records.
 */
final class RequestPaths {

    /** Linux's limits (limits.h): a path of at most PATH_MAX bytes with its terminating NUL, a name of at most NAME_MAX bytes. */
    private static final int PATH_MAX = 4096;
    private static final int NAME_MAX = 255;

    /** kubelet's root directory and the pool's, resolved. */
    private final Path kubeletDir;
    private final Path poolDir;

    RequestPaths(Path kubeletDir, Path poolDir) {
        this.kubeletDir = kubeletDir;
        this.poolDir = poolDir;
    }

    Path require(String field, String value) {
        if (value.isEmpty()) {
            throw CsiException.missing(field);
        }
        if (value.indexOf('\0') >= 0 || !value.startsWith("/")) {
            throw CsiException.invalidArgument(field + " must be an absolute path: " + CsiException.printable(value));
        }
        requireLengthsTheKernelTakes(field, value);
        Path path;
        try {
            path = Path.of(value);
        } catch (InvalidPathException e) {
            throw CsiException.invalidArgument(field + " is not a valid path: " + CsiException.printable(value));
        }
        String normal = path.normalize().toString();
        String given = value.length() > 1 && value.endsWith("/") ? value.substring(0, value.length() - 1) : value;
        if (!normal.equals(given) || path.getNameCount() == 0) {
            throw CsiException.invalidArgument(field + " must be a plain absolute path without '.', '..' or '//': "
                    + CsiException.printable(value));
        }
        Path resolved = resolveParents(path);
        if (!resolved.startsWith(kubeletDir) || resolved.equals(kubeletDir)) {
            throw CsiException.invalidArgument(field + " " + CsiException.printable(value) + " is not below kubelet's directory "
                    + kubeletDir + (resolved.equals(path) ? "" : " (it resolves to " + resolved + ")"));
        }
        if (resolved.startsWith(poolDir) || poolDir.startsWith(resolved)) {
            throw CsiException.invalidArgument(field + " " + CsiException.printable(value) + " leads into the driver's pool "
                    + poolDir + " or holds it");
        }
        // A mount point is never a symlink, and lstat of one whose NFS server is gone can block for good.
        if (!isMountPoint(resolved) && Files.isSymbolicLink(path)) {
            throw CsiException.invalidArgument(field + " is a symbolic link: " + CsiException.printable(value));
        }
        return resolved;
    }

    /**
     * A path the kernel refuses for its length (ENAMETOOLONG) names nothing that could exist: it
     * is a bad argument, found before any system call could fail on it (and answer INTERNAL).
     */
    private static void requireLengthsTheKernelTakes(String field, String value) {
        int bytes = value.getBytes(StandardCharsets.UTF_8).length;
        if (bytes >= PATH_MAX) {
            throw CsiException.invalidArgument(field + " is " + bytes + " bytes long, longer than a path can be (" + (PATH_MAX - 1)
                    + " bytes): " + CsiException.printable(value));
        }
        for (String name : value.split("/")) {
            int nameBytes = name.getBytes(StandardCharsets.UTF_8).length;
            if (nameBytes > NAME_MAX) {
                throw CsiException.invalidArgument(field + " holds a name of " + nameBytes + " bytes, longer than a file name can be ("
                        + NAME_MAX + " bytes): " + CsiException.printable(value));
            }
        }
    }

    private static boolean isMountPoint(Path path) {
        try {
            return MountTable.read().isMountPoint(path);
        } catch (MountException e) {
            return false;
        }
    }

    /** The path with its nearest existing ancestor resolved through symlinks, and the rest as given. */
    private static Path resolveParents(Path path) {
        Path existing = path.getParent();
        while (existing != null && !Files.isDirectory(existing)) {
            existing = existing.getParent();
        }
        if (existing == null) {
            return path;
        }
        try {
            return existing.toRealPath().resolve(existing.relativize(path));
        } catch (IOException e) {
            throw CsiException.invalidArgument("cannot resolve " + existing + ": " + e.getMessage());
        }
    }
}
