package dev.strata.csi.node;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.LinkOption;
import java.nio.file.Path;

/**
 * Staging and target paths from kubelet. They must be plain absolute paths: no '..', no '.', no
 * NUL, no doubled slashes, and the path itself not a symlink; anything else is INVALID_ARGUMENT
 * and the driver touches nothing. The parent directory is resolved through symlinks, since the
 * mount table names mounts by their resolved path and /var/lib/kubelet is a symlink on some hosts.
 */
final class RequestPaths {

    private static final int MAX_LENGTH = 4096;

    private RequestPaths() {}

    static Path require(String field, String value) {
        if (value.isEmpty()) {
            throw CsiException.missing(field);
        }
        if (value.length() > MAX_LENGTH || value.indexOf('\0') >= 0 || !value.startsWith("/")) {
            throw CsiException.invalidArgument(field + " must be an absolute path: " + CsiException.printable(value));
        }
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
        Path parent = path.getParent();
        Path resolved;
        try {
            resolved = parent != null && Files.isDirectory(parent) ? parent.toRealPath().resolve(path.getFileName()) : path;
        } catch (IOException e) {
            resolved = path; // the operation itself then reports what is wrong with the path
        }
        // A mount point is never a symlink, and lstat of one whose NFS server is gone can block for good.
        if (!isMountPoint(resolved) && Files.isSymbolicLink(path)) {
            throw CsiException.invalidArgument(field + " is a symbolic link: " + CsiException.printable(value));
        }
        return resolved;
    }

    private static boolean isMountPoint(Path path) {
        try {
            return MountTable.read().isMountPoint(path);
        } catch (MountException e) {
            return false;
        }
    }

    /** Removes a target path once nothing is mounted there; one that holds files is left for a person. */
    static void removeTarget(Path target) throws IOException {
        try {
            Files.deleteIfExists(target);
        } catch (java.nio.file.DirectoryNotEmptyException e) {
            throw CsiException.failedPrecondition("target_path " + target + " is not mounted but holds files; leaving it for a person to look at");
        }
    }

    /**
     * Makes the target path a bind mount goes onto, unless it is there: a file for a raw block
     * device, else a directory. Its parent must exist (INVALID_ARGUMENT otherwise): kubelet makes
     * it, the driver makes only the target.
     */
    static void makeTarget(Path target, boolean file) throws IOException {
        Path parent = target.getParent();
        if (parent == null || !Files.isDirectory(parent)) {
            throw CsiException.invalidArgument("target_path " + target + " has no parent directory; kubelet creates it");
        }
        if (Files.exists(target, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        if (file) {
            Files.createFile(target);
        } else {
            Files.createDirectory(target);
        }
    }
}
