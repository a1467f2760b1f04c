package dev.strata.csi.controller.nfs;

import dev.strata.csi.backend.nfs.NfsSnapshotId;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.system.TransientLock;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * NFS volumes made from a content source (a snapshot or another volume): the source's tree copied
 * into {@code .strata-csi/restoring/<key>} and renamed into place as the volume's directory once
 * complete, so a volume never shows a part of its source. {@link NfsController#create} writes the
 * record first and calls this under no lock but the copy's own.
 */
final class ContentSources {

    private final VolumeQuotas quotas;
    /** How long a call waits for a record's lock (see {@link NfsController}). */
    private final Duration recordWait;
    private final Crashes<NfsCrashPoint> crashes;
    private final Log log;

    ContentSources(VolumeQuotas quotas, Duration recordWait, Crashes<NfsCrashPoint> crashes, Log log) {
        this.quotas = quotas;
        this.recordWait = recordWait;
        this.crashes = crashes;
        this.log = log;
    }

    /**
     * Copies the source into {@code .strata-csi/restoring/<key>} and renames the copy into place as
     * the volume's directory, unless a call before this one got that far. A source gone since the
     * record was written (a retry after a crash) undoes the record: NOT_FOUND, nothing left.
     */
    void restore(Export export, NfsRequest wanted, NfsVolumeRecord record) throws IOException, InterruptedException {
        String subDir = wanted.volume().subDir();
        if (export.exists(subDir)) {
            return;
        }
        String key = VolumeRecords.key(subDir);
        try (TransientLock held = export.lockCopy(export.restoringLock(key), "volume " + wanted.name())) {
            if (export.exists(subDir)) {
                return; // placed by the call whose copy this one waited behind
            }
            Path source;
            try {
                source = sourceTree(export, wanted.source());
            } catch (CsiException e) {
                if (e.code() == io.grpc.Status.Code.NOT_FOUND) {
                    try (TransientLock recordHeld = export.lockRecord(subDir, "volume " + wanted.name(), recordWait)) {
                        quotas.release(export, record);
                        export.records().delete(subDir);
                    }
                }
                throw e;
            }
            Path partial = export.restoringCopy(key);
            TreeCopy.remove(partial); // what a crash or a failed copy left
            TreeCopy.Result copied = export.copy(source, partial);
            crashes.reach(NfsCrashPoint.RESTORE_COPIED);
            boolean recorded;
            try (TransientLock recordHeld = export.lockRecord(subDir, "volume " + wanted.name(), recordWait)) {
                recorded = export.records().holds(subDir, record);
                if (recorded) {
                    export.place(partial, subDir);
                }
            }
            if (!recorded) {
                TreeCopy.remove(partial);
                throw NfsController.deletedMeanwhile(record);
            }
            log.info("volume made from its source", "volume", record.getVolumeId(), "source", wanted.source().toString(),
                    "bytes", copied.bytes(), "entries", copied.entries(), "skipped", copied.skipped(),
                    "attributes_refused", copied.attributesRefused());
            crashes.reach(NfsCrashPoint.RESTORE_PLACED);
        }
    }

    /**
     * NOT_FOUND when the source is gone; a volume whose capacity is enforced must hold its
     * source's data: a smaller one is OUT_OF_RANGE, since its first write would fail. Without a
     * limit nothing holds it to its size.
     */
    static void checkRoom(Export export, NfsRequest wanted) throws IOException {
        Path source = sourceTree(export, wanted.source());
        if (!VolumeQuotas.wanted(export, wanted.capacityBytes())) {
            return;
        }
        long data = wanted.source().snapshot().isPresent()
                ? NfsSnapshots.ready(export, wanted.source().snapshot().get()).getDataBytes()
                : TreeCopy.bytes(source);
        if (data > wanted.capacityBytes()) {
            throw CsiException.outOfRange("the " + wanted.source() + " holds " + data + " bytes of data; a volume of "
                    + wanted.capacityBytes() + " bytes, its capacity enforced, cannot hold them: ask for at least that");
        }
    }

    /**
     * Removes the copies of restores and clones a crash cut short in {@code export} (a retry copies
     * afresh); a copy whose lock is held is being made and stays. Returns how many.
     */
    int removePartialCopies(Export export) throws IOException {
        int removed = 0;
        // A partial copy is named by its volume's key; anything else there is not one: a lock
        // file, or the .nfsXXXX name an NFS client gives a file removed while open.
        for (String entry : entries(export.restoring())) {
            if (VolumeRecords.isKey(entry) && export.removeAbandonedCopy(export.restoringCopy(entry), export.restoringLock(entry), log)) {
                removed++;
            }
        }
        return removed;
    }

    /** The tree a volume is made from: a complete snapshot's copy, or the source volume's directory; NOT_FOUND when gone. */
    private static Path sourceTree(Export export, NfsRequest.ContentSource source) throws IOException {
        if (source.snapshot().isPresent()) {
            NfsSnapshotId id = source.snapshot().get();
            NfsSnapshots.ready(export, id);
            return export.snapshots().data(id.name());
        }
        NfsVolumeId id = source.volume().orElseThrow();
        if (export.records().readOf(id.volume().subDir(), id.toString()).isEmpty() || !export.exists(id.volume().subDir())) {
            throw CsiException.notFound("source volume " + id + " does not exist");
        }
        return export.directory(id.volume().subDir());
    }

    private static List<String> entries(Path dir) throws IOException {
        if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
            return List.of();
        }
        try (var stream = Files.list(dir)) {
            return stream.map(path -> path.getFileName().toString()).toList();
        }
    }
}
