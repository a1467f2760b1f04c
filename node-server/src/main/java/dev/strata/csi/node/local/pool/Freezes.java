package dev.strata.csi.node.local.pool;

import dev.strata.csi.backend.local.records.FreezeRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.fs.FilesystemFreezer;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.system.RecordFiles;
import java.io.IOException;
import java.nio.file.Path;
import java.util.Map;

/**
 * The pool's frozen filesystems. A freeze outlives the process that made it, and a filesystem left
 * frozen hangs every writer of the volume, so each freeze is recorded ({@code <image>.frozen} in
 * the pool, written durably) before FIFREEZE and the record removed only after FITHAW: the next
 * start thaws whatever a crash left frozen ({@link #thawLeftovers}).
 */
final class Freezes {

    static final String SUFFIX = ".frozen";

    /** Version 1: the first. */
    private static final RecordFiles.Format<FreezeRecord> FORMAT = new RecordFiles.Format<>(FreezeRecord.class, 1,
            FreezeRecord::getVersion, (record, version) -> record.toBuilder().setVersion(version).build());

    private final RecordFiles<FreezeRecord> records;
    private final FilesystemFreezer freezer;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    Freezes(Path poolDir, FilesystemFreezer freezer, Crashes<CrashPoint> crashes, Log log) {
        this.records = new RecordFiles<>(poolDir, SUFFIX, FORMAT);
        this.freezer = freezer;
        this.crashes = crashes;
        this.log = log;
    }

    /** A frozen filesystem; closing it thaws the filesystem, then forgets the freeze. */
    final class Frozen implements AutoCloseable {
        private final String image;
        private final Path mountPoint;

        private Frozen(String image, Path mountPoint) {
            this.image = image;
            this.mountPoint = mountPoint;
        }

        @Override
        public void close() throws IOException, DeviceException {
            freezer.thaw(mountPoint);
            records.delete(image);
        }
    }

    /** Freezes the filesystem of {@code image} mounted at {@code mountPoint}, recorded first. */
    Frozen freeze(String image, Path mountPoint) throws IOException, DeviceException {
        records.write(image, FreezeRecord.newBuilder().setVolume(image).setMountPoint(mountPoint.toString()).build());
        try {
            freezer.freeze(mountPoint);
        } catch (DeviceException e) {
            records.delete(image);
            throw e;
        }
        log.info("filesystem frozen for a copy", "volume", image, "mount_point", mountPoint);
        crashes.reach(CrashPoint.FROZEN);
        return new Frozen(image, mountPoint);
    }

    /** At start: thaws every filesystem a crash left frozen (or about to be), then forgets it. */
    void thawLeftovers() throws IOException {
        records.removeTemporaries();
        Map<String, FreezeRecord> left = records.all((file, e) ->
                log.error("unreadable freeze record; if its filesystem is frozen, thaw it with fsfreeze --unfreeze", "file", file,
                        "error", e.getMessage()));
        for (FreezeRecord record : left.values()) {
            Path mountPoint = Path.of(record.getMountPoint());
            try {
                boolean thawed = freezer.thaw(mountPoint);
                log.warn(thawed ? "thawed a filesystem an interrupted copy left frozen" : "a filesystem recorded as frozen was not",
                        "volume", record.getVolume(), "mount_point", mountPoint);
            } catch (DeviceException e) {
                if (java.nio.file.Files.exists(mountPoint)) { // kept: the next start tries again
                    log.error("cannot thaw a filesystem recorded as frozen; thaw it with fsfreeze --unfreeze", "volume",
                            record.getVolume(), "mount_point", mountPoint, "error", e.getMessage());
                    continue;
                }
                // Gone since (a reboot thaws everything): nothing is frozen there any more.
                log.info("a filesystem recorded as frozen is not mounted any more", "volume", record.getVolume(),
                        "mount_point", mountPoint);
            }
            records.delete(record.getVolume());
        }
    }
}
