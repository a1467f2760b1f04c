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
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The pool's frozen filesystems. A freeze outlives the process that made it, and a filesystem left
 * frozen hangs every writer of the volume, so each freeze is recorded ({@code <image>.frozen} in
 * the pool, written durably) before FIFREEZE and the record removed only after FITHAW: the next
 * start thaws whatever a crash left frozen ({@link #thawLeftovers}). The node's one instance serves
 * both a snapshot's copy and a group snapshot's cut, so a copy of an image a group holds frozen
 * copies it as it is ({@link #frozen}): FIFREEZE of a frozen filesystem is refused.
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
    /** The images frozen by this process now. */
    private final Set<String> frozen = ConcurrentHashMap.newKeySet();

    Freezes(Path poolDir, FilesystemFreezer freezer, Crashes<CrashPoint> crashes, Log log) {
        this.records = new RecordFiles<>(poolDir, SUFFIX, FORMAT);
        this.freezer = freezer;
        this.crashes = crashes;
        this.log = log;
    }

    /**
     * A filesystem to freeze, its freeze recorded; closing it thaws the filesystem, then forgets
     * the freeze. A group snapshot's cut records every freeze first, freezes them together, thaws
     * each once its member is taken and forgets them last, so that its freeze window holds no
     * record write ({@link FrozenVolumes}).
     */
    final class Frozen implements AutoCloseable {
        private final String image;
        private final Path mountPoint;
        private final AtomicBoolean frozenHere = new AtomicBoolean();
        /** System.nanoTime() as FIFREEZE was called, as it returned, and as FITHAW returned; 0 before. */
        private volatile long freezing;
        private volatile long frozenAt;
        private volatile long thawedAt;

        private Frozen(String image, Path mountPoint) {
            this.image = image;
            this.mountPoint = mountPoint;
        }

        /** FIFREEZE. */
        void freeze() throws DeviceException {
            freezing = System.nanoTime();
            freezer.freeze(mountPoint);
            frozenAt = System.nanoTime();
            frozenHere.set(true);
            frozen.add(image);
            log.info("filesystem frozen for a copy", "volume", image, "mount_point", mountPoint);
            crashes.reach(CrashPoint.FROZEN);
        }

        /** FITHAW, once, whoever calls it first; nothing when never frozen. */
        void thaw() throws DeviceException {
            if (frozenHere.compareAndSet(true, false)) {
                freezer.thaw(mountPoint);
                thawedAt = System.nanoTime();
                frozen.remove(image);
            }
        }

        long freezing() {
            return freezing;
        }

        long frozenAt() {
            return frozenAt;
        }

        long thawedAt() {
            return thawedAt;
        }

        /** Whether it was frozen and its FITHAW failed: it may still be frozen. */
        boolean thawFailed() {
            return frozenAt != 0 && thawedAt == 0 && !frozenHere.get();
        }

        /** Nanoseconds from the FIFREEZE call to the FITHAW's return (until now while frozen); 0 when never frozen. */
        long frozenFor() {
            if (frozenAt == 0) {
                return 0;
            }
            return (thawedAt != 0 ? thawedAt : System.nanoTime()) - freezing;
        }

        /** Forgets the freeze, once thawed. */
        void forget() throws IOException {
            records.delete(image);
        }

        @Override
        public void close() throws IOException, DeviceException {
            thaw();
            forget();
        }
    }

    /** Records the freeze of {@code image}'s filesystem mounted at {@code mountPoint}, before any FIFREEZE. */
    Frozen record(String image, Path mountPoint) throws IOException {
        records.write(image, FreezeRecord.newBuilder().setVolume(image).setMountPoint(mountPoint.toString()).build());
        return new Frozen(image, mountPoint);
    }

    /** Freezes the filesystem of {@code image} mounted at {@code mountPoint}, recorded first. */
    Frozen freeze(String image, Path mountPoint) throws IOException, DeviceException {
        Frozen frozen = record(image, mountPoint);
        try {
            frozen.freeze();
        } catch (DeviceException e) {
            frozen.forget();
            throw e;
        }
        return frozen;
    }

    /** Whether this process holds the filesystem of {@code image} frozen now. */
    boolean frozen(String image) {
        return frozen.contains(image);
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
