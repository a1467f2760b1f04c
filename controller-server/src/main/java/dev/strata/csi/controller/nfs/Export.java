package dev.strata.csi.controller.nfs;

import dev.strata.csi.backend.nfs.FileMode;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.DurableFiles;
import dev.strata.csi.system.TransientLock;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;

/**
 * An export as controller-server sees it: mounted at {@code dir}. Volume directories are reached
 * one component at a time and a symbolic link on the way is refused, so a link that a pod made in
 * a directory it can write never leads the controller outside the export. Its locks (see
 * {@link TransientLock}) hold between controller-server replicas, on this host or another.
 */
final class Export {

    private static final DateTimeFormatter ARCHIVE_TIME = DateTimeFormatter.ofPattern("yyyyMMdd'T'HHmmss'Z'").withZone(ZoneOffset.UTC);

    private final NfsVolume export;
    private final Path dir;
    private final MountPoint mount;
    private final Kernel kernel;

    Export(NfsVolume export, Path dir, MountPoint mount, Kernel kernel) {
        this.export = export;
        this.dir = dir;
        this.mount = mount;
        this.kernel = kernel;
    }

    NfsVolume export() {
        return export;
    }

    /** The driver's own directory in the export. */
    Path driverDir() {
        return dir.resolve(NfsVolume.RESERVED);
    }

    VolumeRecords records() {
        return new VolumeRecords(recordsDir());
    }

    /**
     * Held while a call reads, changes and writes the record of the volume in {@code subDir}, so
     * that calls of two replicas at once (publishing one volume to two nodes, say) never lose each
     * other's change. Such a change takes moments: a call waits up to {@code wait} for the lock,
     * then answers ABORTED, and its retry tries again. The lock file lies beside the record.
     */
    TransientLock lockRecord(String subDir, String what, Duration wait) throws IOException, InterruptedException {
        DurableFiles.createDirectories(recordsDir());
        Path file = recordsDir().resolve(VolumeRecords.key(subDir) + ".lock");
        return TransientLock.acquire(kernel, file, wait).orElseThrow(() -> CsiException.aborted("the record of " + what
                + " is being changed by another call (of this or another controller-server replica) for longer than "
                + wait.toMillis() + " ms; retry later"));
    }

    /**
     * Held while a call copies into, or removes, a snapshot or a restored volume's copy. A copy can
     * outlast its call (the call answers at --nfs-timeout, the copy goes on), so the retry, or
     * another replica, finds the lock held and answers ABORTED at once instead of copying over it;
     * the kernel drops the lock with a process that dies, and the next call takes it and starts afresh.
     */
    TransientLock lockCopy(Path file, String what) throws IOException {
        DurableFiles.createDirectories(file.getParent());
        return TransientLock.tryAcquire(kernel, file).orElseThrow(() -> CsiException.aborted(what
                + " is being worked on by an earlier call that is still copying or removing; retry later"));
    }

    /**
     * Removes a copy a crash left, unless a call of this or another replica holds its lock and is
     * making it. Whether it removed one.
     */
    boolean removeAbandonedCopy(Path copy, Path lock, Log log) throws IOException {
        if (!Files.exists(copy, LinkOption.NOFOLLOW_LINKS)) {
            return false;
        }
        try (TransientLock held = lockCopy(lock, copy.toString())) {
            TreeCopy.remove(copy);
            log.info("removed a partial copy a crash left", "path", copy);
            return true;
        } catch (CsiException busy) {
            return false;
        }
    }

    private Path recordsDir() {
        return driverDir().resolve("volumes");
    }

    /** Whether the filesystem under the export root can limit a directory's space with project quotas. */
    boolean projectQuotas() {
        return (mount.fsType().equals("xfs") && (mount.superOptions().contains("prjquota") || mount.superOptions().contains("pquota")))
                || (mount.fsType().equals("ext4") && mount.superOptions().contains("prjquota"));
    }

    Path mountPoint() {
        return dir;
    }

    long availableBytes() throws IOException {
        return Files.getFileStore(dir).getUsableSpace();
    }

    /** Whether the volume's directory is there. */
    boolean exists(String subDir) throws IOException {
        return Files.isDirectory(walk(subDir, false), LinkOption.NOFOLLOW_LINKS);
    }

    /** Makes the volume's directory and any missing parents; sets its mode when one is given. Returns it. */
    Path make(String subDir, java.util.Optional<Integer> mode) throws IOException {
        Path path = walk(subDir, true);
        if (mode.isPresent()) {
            Files.setPosixFilePermissions(path, FileMode.permissions(mode.get()));
        }
        return path;
    }

    /**
     * Moves the volume's directory into the driver's trash in one rename, so the volume is gone
     * at once and removing its files can take as long as it takes (and be resumed). Returns
     * false when there was no directory.
     */
    boolean moveToTrash(String subDir, String key) throws IOException {
        Path path = walk(subDir, false);
        if (!Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS)) {
            return false;
        }
        Path trash = driverDir().resolve("trash");
        Files.createDirectories(trash);
        Files.move(path, trash.resolve(key), StandardCopyOption.ATOMIC_MOVE);
        DurableFiles.syncDirectory(path.getParent());
        return true;
    }

    /** Removes what {@link #moveToTrash} or {@link #discard} put there under {@code key}; links are removed, never followed. */
    void emptyTrash(String key) throws IOException {
        TreeCopy.remove(driverDir().resolve("trash").resolve(key));
    }

    /**
     * Moves a tree of the driver's directory (a snapshot's copy) into the trash under {@code key}
     * in one rename, then removes it: cut short, the retry finds it there.
     */
    void discard(Path tree, String key) throws IOException {
        if (Files.exists(tree, LinkOption.NOFOLLOW_LINKS)) {
            Path trash = driverDir().resolve("trash");
            Files.createDirectories(trash);
            TreeCopy.remove(trash.resolve(key)); // what an earlier discard under this key left
            Files.move(tree, trash.resolve(key), StandardCopyOption.ATOMIC_MOVE);
            DurableFiles.syncDirectory(tree.getParent());
        }
        emptyTrash(key);
    }

    /** The export's snapshots, in the driver's directory. */
    ExportSnapshotStore snapshots() {
        return new ExportSnapshotStore(driverDir().resolve("snapshots"));
    }

    /** Where a restored or cloned volume's copy is made before it is renamed into place, and its lock. */
    Path restoring() {
        return driverDir().resolve("restoring");
    }

    /** The copy made for the volume of {@code key} (see {@link VolumeRecords#key}) before it is renamed into place. */
    Path restoringCopy(String key) {
        return restoring().resolve(key);
    }

    /** The lock file ({@link #lockCopy}) of that copy. */
    Path restoringLock(String key) {
        return restoring().resolve(key + ".lock");
    }

    /** The volume's directory, reached without links; NOT_FOUND when it is not there. */
    Path directory(String subDir) throws IOException {
        Path path = walk(subDir, false);
        if (!Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS)) {
            throw CsiException.notFound("the directory " + subDir + " of " + export.source() + " is not there");
        }
        return path;
    }

    /** Copies {@code tree} (a volume's directory or a snapshot's) to {@code target}, in the driver's directory. */
    TreeCopy.Result copy(Path tree, Path target) throws IOException {
        return TreeCopy.copy(kernel, tree, target);
    }

    /**
     * Renames a complete copy into place as the volume's directory in one step (making its
     * parents), so a volume's directory never holds a partial copy. Returns the directory.
     */
    Path place(Path copy, String subDir) throws IOException {
        int slash = subDir.lastIndexOf('/');
        Path parent = slash < 0 ? dir : walk(subDir.substring(0, slash), true);
        Path path = parent.resolve(subDir.substring(slash + 1));
        Files.move(copy, path, StandardCopyOption.ATOMIC_MOVE);
        DurableFiles.syncDirectory(parent);
        DurableFiles.syncDirectory(copy.getParent());
        return path;
    }

    /** Renames the volume's directory to {@code archived-<name>-<UTC time>} beside it; the new path, or null if there was no directory. */
    Path archive(String subDir, Instant now) throws IOException {
        Path path = walk(subDir, false);
        if (!Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS)) {
            return null;
        }
        Path archived = path.resolveSibling("archived-" + path.getFileName() + "-" + ARCHIVE_TIME.format(now));
        Files.move(path, archived, StandardCopyOption.ATOMIC_MOVE);
        DurableFiles.syncDirectory(path.getParent());
        return archived;
    }

    /**
     * The path of {@code subDir} in the export, checking each component on the way: a symbolic
     * link is refused; with {@code create}, a missing directory is made.
     */
    private Path walk(String subDir, boolean create) throws IOException {
        Path path = dir;
        for (String component : subDir.split("/")) {
            path = path.resolve(component);
            if (Files.isSymbolicLink(path)) {
                throw CsiException.failedPrecondition("subDir " + subDir + " passes through a symbolic link (" + dir.relativize(path)
                        + "); the driver does not follow links in an export");
            }
            if (create && !Files.exists(path, LinkOption.NOFOLLOW_LINKS)) {
                try {
                    Files.createDirectory(path);
                    DurableFiles.syncDirectory(path.getParent());
                } catch (java.nio.file.FileAlreadyExistsException raced) {
                    // made meanwhile by another call; checked again below
                }
            }
            if (create && !Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS)) {
                throw CsiException.failedPrecondition("subDir " + subDir + ": " + dir.relativize(path) + " exists and is not a directory");
            }
        }
        return path;
    }
}
