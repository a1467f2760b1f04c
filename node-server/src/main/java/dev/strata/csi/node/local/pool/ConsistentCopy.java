package dev.strata.csi.node.local.pool;

import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.fs.FilesystemFreezer;
import dev.strata.csi.node.local.image.ImageFiles;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Optional;

/**
 * The copy a snapshot, a restore and a clone make of their content: a reflink where the pool's
 * filesystem makes one, consistent without journal replay. An image whose filesystem is mounted
 * on this node is frozen for the copy only, and always thawed ({@link Freezes}); a freeze a crash
 * left behind is thawed at the next start ({@link #thawLeftovers}). A raw block volume is copied
 * as it is: no filesystem of the driver's is there to freeze.
 */
final class ConsistentCopy {

    /** What a copy starts from: a snapshot's file or an image's, and what its record says the file holds. */
    record Content(Path file, long capacityBytes, String filesystem, boolean usedAsBlock, boolean encrypted, Optional<String> liveImage) {

        /** A live image's content, which may be written while it is copied. */
        static Content ofImage(ImageRecord image, Path file) {
            return new Content(file, image.getCapacityBytes(), image.getFilesystem(), image.getUsedAsBlock(), image.getEncrypted(),
                    Optional.of(image.getName()));
        }

        /** A snapshot's content, which nothing writes. */
        static Content ofSnapshot(SnapshotRecord snapshot, Path file) {
            return new Content(file, snapshot.getCapacityBytes(), snapshot.getFilesystem(), snapshot.getUsedAsBlock(), snapshot.getEncrypted(),
                    Optional.empty());
        }
    }

    /** Where an image's filesystem is mounted on this node, if it is: the pool's images know their loop devices. */
    @FunctionalInterface
    interface FilesystemMounts {
        Optional<Path> of(String image) throws IOException, DeviceException, MountException;
    }

    private final ImageFiles files;
    private final Freezes freezes;
    private final FilesystemMounts mounts;

    ConsistentCopy(Path poolDir, ImageFiles files, FilesystemFreezer freezer, FilesystemMounts mounts, Crashes<CrashPoint> crashes, Log log) {
        this.files = files;
        this.freezes = new Freezes(poolDir, freezer, crashes, log);
        this.mounts = mounts;
    }

    /** The pool's freezes, which a group snapshot's cut takes too. */
    Freezes freezes() {
        return freezes;
    }

    /** Copies {@code content} to {@code to}, replacing a leftover of an interrupted copy; durable once synced ({@link ImageFiles#sync}). */
    ImageFiles.CopyMethod copy(Content content, Path to) throws IOException, DeviceException, MountException {
        Optional<Path> mounted = Optional.empty();
        if (content.liveImage().isPresent() && !content.usedAsBlock() && !freezes.frozen(content.liveImage().get())) { // a group's cut holds it frozen
            mounted = mounts.of(content.liveImage().get());
        }
        if (mounted.isEmpty()) {
            return files.copy(content.file(), to);
        }
        try (Freezes.Frozen frozen = freezes.freeze(content.liveImage().get(), mounted.get())) {
            return files.copy(content.file(), to);
        }
    }

    /** At start, before anything else: a filesystem left frozen stops its volume's writers. */
    void thawLeftovers() throws IOException {
        freezes.thawLeftovers();
    }
}
