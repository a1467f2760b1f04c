package dev.strata.csi.node.backend;

import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;

/**
 * kubelet's target paths, as every backend makes and removes them: the driver makes only the
 * target itself (a directory, or a file for a raw block device) and removes only what it made.
 */
public final class TargetPaths {

    private TargetPaths() {}

    /**
     * Removes a target path once nothing is mounted there, if it is what the driver made: an
     * empty directory, or the empty file a raw block device was bound onto. Anything else (a file
     * with content, a device node, a link, a directory with files) is left in place for a person:
     * FAILED_PRECONDITION, and the log says what is there.
     */
    public static void removeTarget(Path target) throws IOException {
        BasicFileAttributes found;
        try {
            found = Files.readAttributes(target, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            return;
        }
        boolean made = found.isDirectory() || (found.isRegularFile() && found.size() == 0);
        if (!made) {
            throw CsiException.failedPrecondition("target_path " + target + " is not mounted and holds " + kind(found)
                    + ", which the driver did not make; left in place for a person to look at");
        }
        try {
            Files.deleteIfExists(target);
        } catch (DirectoryNotEmptyException e) {
            throw CsiException.failedPrecondition("target_path " + target + " is not mounted but holds files; "
                    + "left in place for a person to look at");
        }
    }

    private static String kind(BasicFileAttributes found) {
        if (found.isSymbolicLink()) {
            return "a symbolic link";
        }
        return found.isRegularFile() ? "a file of " + found.size() + " bytes" : "a device node, socket or pipe";
    }

    /**
     * Makes the target path a bind mount goes onto, unless it is there: a file for a raw block
     * device, else a directory. Its parent must exist (INVALID_ARGUMENT otherwise): kubelet makes
     * it, the driver makes only the target.
     */
    public static void makeTarget(Path target, boolean file) throws IOException {
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
