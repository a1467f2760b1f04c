package dev.strata.csi.controller.nfs;

import com.google.protobuf.Timestamp;
import csi.v1.Csi.Snapshot;
import dev.strata.csi.backend.nfs.NfsParameters;
import dev.strata.csi.backend.nfs.NfsSnapshotId;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.backend.nfs.records.NfsSnapshotRecord;
import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Bounded;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.system.DurableFiles;
import dev.strata.csi.system.TransientLock;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * NFS snapshots: a snapshot is a copy of a volume's directory in its export's driver directory
 * ({@link ExportSnapshotStore}), made with {@link TreeCopy}. CreateSnapshot, DeleteSnapshot and
 * ListSnapshots of {@link NfsController} come here; each step on an export runs with a deadline
 * (see {@link Bounded}).
 */
final class NfsSnapshots {

    private final Exports exports;
    private final Duration deadline;
    private final Clock clock;
    private final Crashes<NfsCrashPoint> crashes;
    private final Log log;

    NfsSnapshots(Exports exports, Duration deadline, Clock clock, Crashes<NfsCrashPoint> crashes, Log log) {
        this.exports = exports;
        this.deadline = deadline;
        this.clock = clock;
        this.crashes = crashes;
        this.log = log;
    }

    /**
     * Copies the volume's directory into the export's driver directory (see {@link TreeCopy}): the
     * record first (CREATING), then the copy into {@code <key>.partial/}, renamed into place once
     * complete, then the record READY. Only a READY snapshot is reported; a retry of a snapshot cut
     * short copies afresh. No freeze exists over NFS: a file written during the copy is copied as it
     * was when read.
     */
    Snapshot create(NfsVolumeId source, String name, Map<String, String> parameters) throws Exception {
        NfsSnapshotId.checkName(name);
        NfsParameters.SNAPSHOT_CLASS.require(parameters);
        NfsVolume volume = source.volume();
        NfsSnapshotId id = new NfsSnapshotId(volume.export(), name);
        return Bounded.call(deadline, "CreateSnapshot " + name + " of " + volume.source(), () -> {
            Export export = exports.open(volume.export(), List.of());
            ExportSnapshotStore store = export.snapshots();
            try (TransientLock held = export.lockCopy(store.lock(name), "snapshot " + name)) {
                Optional<NfsSnapshotRecord> existing = store.read(name);
                if (existing.isPresent()) {
                    NfsSnapshotRecord record = existing.get();
                    if (!record.getSourceVolumeId().equals(source.toString())) {
                        throw CsiException.alreadyExists("snapshot " + name + " exists of volume " + record.getSourceVolumeId()
                                + "; asked for one of " + source);
                    }
                    if (record.getState() == NfsSnapshotRecord.State.DELETING) {
                        throw CsiException.aborted("snapshot " + name + " is being deleted; DeleteSnapshot's retry finishes that");
                    }
                    if (record.getState() == NfsSnapshotRecord.State.READY) {
                        return snapshot(record);
                    }
                }
                Optional<NfsVolumeRecord> sourceRecord = export.records().readOf(volume.subDir(), source.toString());
                if (sourceRecord.isEmpty() || !export.exists(volume.subDir())) {
                    throw CsiException.notFound("source volume " + source + " does not exist");
                }
                NfsSnapshotRecord record = existing.orElse(null);
                if (record == null) {
                    Instant now = clock.instant();
                    record = NfsSnapshotRecord.newBuilder().setSnapshotId(id.toString()).setName(name)
                            .setSourceVolumeId(source.toString()).setState(NfsSnapshotRecord.State.CREATING)
                            .setCreationTimeSeconds(now.getEpochSecond()).setCreationTimeNanos(now.getNano()).build();
                    store.write(name, record);
                    crashes.reach(NfsCrashPoint.SNAPSHOT_RECORDED);
                }
                Path data = store.data(name);
                long bytes;
                if (Files.isDirectory(data, LinkOption.NOFOLLOW_LINKS)) {
                    bytes = TreeCopy.bytes(data); // renamed into place complete by a call a crash cut short
                } else {
                    Path partial = store.partial(name);
                    TreeCopy.remove(partial); // what a crash or a failed copy left
                    TreeCopy.Result copied = export.copy(export.directory(volume.subDir()), partial);
                    crashes.reach(NfsCrashPoint.SNAPSHOT_COPIED);
                    Files.move(partial, data, StandardCopyOption.ATOMIC_MOVE);
                    DurableFiles.syncDirectory(store.dir());
                    crashes.reach(NfsCrashPoint.SNAPSHOT_PLACED);
                    bytes = copied.bytes();
                    log.info("snapshot taken", "snapshot", id, "volume", source, "bytes", copied.bytes(),
                            "entries", copied.entries(), "skipped", copied.skipped(), "attributes_refused", copied.attributesRefused());
                }
                long capacity = sourceRecord.get().getCapacityBytes();
                record = record.toBuilder().setState(NfsSnapshotRecord.State.READY).setDataBytes(bytes)
                        .setSizeBytes(capacity > 0 ? capacity : bytes).build();
                store.write(name, record);
                return snapshot(record);
            }
        });
    }

    /**
     * The record DELETING first (no longer reported), then the copy moved to the trash and
     * removed, then the record: a retry after a crash anywhere finishes the job.
     */
    void delete(NfsSnapshotId id) throws Exception {
        Bounded.call(deadline, "DeleteSnapshot " + id.name() + " on " + id.export().source(), () -> {
            Export export = exports.open(id.export(), List.of());
            ExportSnapshotStore store = export.snapshots();
            if (!Files.isDirectory(store.dir(), LinkOption.NOFOLLOW_LINKS)) {
                return null;
            }
            try (TransientLock held = export.lockCopy(store.lock(id.name()), "snapshot " + id.name())) {
                Optional<NfsSnapshotRecord> record = store.read(id.name());
                if (record.isPresent() && record.get().getState() != NfsSnapshotRecord.State.DELETING) {
                    store.write(id.name(), record.get().toBuilder().setState(NfsSnapshotRecord.State.DELETING).build());
                    crashes.reach(NfsCrashPoint.DELETE_SNAPSHOT_RECORDED);
                }
                String trashKey = "snapshot-" + VolumeRecords.key(id.name());
                export.discard(store.data(id.name()), trashKey);
                TreeCopy.remove(store.partial(id.name()));
                crashes.reach(NfsCrashPoint.DELETE_SNAPSHOT_DISCARDED);
                if (record.isPresent()) {
                    store.delete(id.name());
                    log.info("snapshot deleted", "snapshot", id);
                }
            }
            return null;
        });
    }

    /** The complete snapshots of every export mounted now, for ListSnapshots. */
    List<Snapshot> list() throws Exception {
        return Bounded.call(deadline, "listing NFS snapshots", () -> {
            List<Snapshot> all = new ArrayList<>();
            for (Export export : exports.mounted()) {
                for (NfsSnapshotRecord record : export.snapshots().all(log)) {
                    if (record.getState() == NfsSnapshotRecord.State.READY) {
                        all.add(snapshot(record));
                    }
                }
            }
            return all;
        });
    }

    /** The record of a complete snapshot, to make a volume from; NOT_FOUND when there is none. */
    static NfsSnapshotRecord ready(Export export, NfsSnapshotId id) throws IOException {
        return export.snapshots().read(id.name())
                .filter(found -> found.getSnapshotId().equals(id.toString()) && found.getState() == NfsSnapshotRecord.State.READY)
                .orElseThrow(() -> CsiException.notFound("snapshot " + id + " does not exist"));
    }

    /**
     * Removes the partial copies of snapshots a crash cut short in {@code export}; a copy whose lock
     * is held is being made and stays, and the records stay for the retries. Returns how many.
     */
    int removePartialCopies(Export export) throws IOException {
        ExportSnapshotStore store = export.snapshots();
        int removed = 0;
        for (NfsSnapshotRecord record : store.all(log)) {
            if (record.getState() == NfsSnapshotRecord.State.CREATING
                    && export.removeAbandonedCopy(store.partial(record.getName()), store.lock(record.getName()), log)) {
                removed++;
            }
        }
        return removed;
    }

    private static Snapshot snapshot(NfsSnapshotRecord record) {
        return Snapshot.newBuilder().setSnapshotId(record.getSnapshotId()).setSourceVolumeId(record.getSourceVolumeId())
                .setSizeBytes(record.getSizeBytes()).setReadyToUse(true)
                .setCreationTime(Timestamp.newBuilder().setSeconds(record.getCreationTimeSeconds()).setNanos(record.getCreationTimeNanos()))
                .build();
    }
}
