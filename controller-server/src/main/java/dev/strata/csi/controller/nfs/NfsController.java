package dev.strata.csi.controller.nfs;

import com.google.protobuf.Timestamp;
import csi.v1.Csi.ControllerServiceCapability;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.backend.ParameterKeys;
import dev.strata.csi.backend.nfs.FileMode;
import dev.strata.csi.backend.nfs.NfsCapabilities;
import dev.strata.csi.backend.nfs.NfsParameters;
import dev.strata.csi.backend.nfs.NfsSnapshotId;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.backend.nfs.OnDelete;
import dev.strata.csi.backend.nfs.records.NfsSnapshotRecord;
import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.controller.backend.ControllerBackend;
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
 * The Controller service's work for NFS volumes. A volume is a directory of an export; its record
 * (name, capacity, project quota id, the nodes it is published to) lives in the export too, so the
 * controller keeps nothing of its own. The capacity is enforced with a project quota where the
 * export's filesystem has them (see {@link VolumeQuotas}). Publishing touches no storage: it
 * checks the volume and keeps the record of nodes for ListVolumes. Every step on an export runs
 * with a deadline (see {@link Bounded}). Each change of a record is made under the record's lock
 * ({@link Export#lockRecord}), which holds between controller-server replicas.
 */
public final class NfsController implements ControllerBackend<NfsController.VolumeHandle, NfsRequest> {

    /**
     * An NFS volume as a call names it (a PersistentVolume's volumeHandle): its id; the id parsed,
     * for a volume this driver provisioned; where its share is, from the id or (a static volume)
     * the volume context, unknown in ControllerUnpublishVolume of a static volume.
     */
    public record VolumeHandle(String volumeId, Optional<NfsVolumeId> dynamic, Optional<NfsVolume> volume) {}

    /** Volume context keys the controller adds for NodeStageVolume and for people reading the PV. */
    public static final String MOUNT_PERMISSIONS = NfsRequest.MOUNT_PERMISSIONS;

    private final Exports exports;
    private final VolumeQuotas quotas;
    private final Duration deadline;
    /** How long a call waits for a record's lock: half its deadline, the other half left for its work. */
    private final Duration recordWait;
    private final Clock clock;
    private final Log log;
    private final NfsCapabilities capabilities = new NfsCapabilities();
    private final Crashes<NfsCrashPoint> crashes;

    public NfsController(Exports exports, ProjectQuotas quotas, Duration deadline, Clock clock, Log log) {
        this(exports, quotas, deadline, clock, Crashes.none(), log);
    }

    public NfsController(Exports exports, ProjectQuotas quotas, Duration deadline, Clock clock, Crashes<NfsCrashPoint> crashes, Log log) {
        this.exports = exports;
        this.crashes = crashes;
        this.quotas = new VolumeQuotas(quotas, log);
        this.deadline = deadline;
        this.recordWait = deadline.dividedBy(2);
        this.clock = clock;
        this.log = log;
    }

    /** Whether StorageClass parameters ask for an NFS volume. */
    @Override
    public boolean wanted(Map<String, String> parameters) {
        return NfsRequest.isNfs(parameters);
    }

    @Override
    public Optional<VolumeHandle> byId(String volumeId) {
        return NfsVolumeId.parse(volumeId).map(id -> new VolumeHandle(volumeId, Optional.of(id), Optional.of(id.volume())));
    }

    @Override
    public Optional<VolumeHandle> byContext(String volumeId, Map<String, String> context) {
        return NfsVolume.fromContext(context).map(volume -> new VolumeHandle(volumeId, Optional.empty(), Optional.of(volume)));
    }

    @Override
    public Optional<VolumeHandle> byStaticId(String volumeId) {
        return Optional.of(new VolumeHandle(volumeId, Optional.empty(), Optional.empty()));
    }

    /** A provisioned volume by its directory, which two ids (onDelete) could name; a static one by its id. */
    @Override
    public String lockKey(VolumeHandle handle) {
        return handle.dynamic().map(id -> lockKey(id.volume())).orElse("nfs static " + handle.volumeId());
    }

    @Override
    public Capabilities capabilities() {
        return capabilities;
    }

    @Override
    public ParameterKeys volumeContextKeys() {
        return NfsParameters.VOLUME_CONTEXT;
    }

    /** Beside every backend's: snapshots, and volumes made from a snapshot or from another volume. */
    @Override
    public List<ControllerServiceCapability.RPC.Type> rpcCapabilities() {
        List<ControllerServiceCapability.RPC.Type> all = new ArrayList<>(ControllerBackend.super.rpcCapabilities());
        all.addAll(List.of(ControllerServiceCapability.RPC.Type.CREATE_DELETE_SNAPSHOT,
                ControllerServiceCapability.RPC.Type.LIST_SNAPSHOTS,
                ControllerServiceCapability.RPC.Type.CLONE_VOLUME));
        return all;
    }

    @Override
    public NfsRequest check(CreateVolumeRequest request) {
        return NfsRequest.of(request);
    }

    @Override
    public String createLockKey(NfsRequest request) {
        return lockKey(request.volume());
    }

    /**
     * Makes the volume's directory, or, from a content source, a copy of the source in the driver's
     * directory renamed into place once complete (see {@link #restore}); the record, written first,
     * keeps the source, so a retry with another source is ALREADY_EXISTS.
     */
    @Override
    public Volume create(NfsRequest wanted) throws Exception {
        NfsVolume volume = wanted.volume();
        NfsVolumeId id = new NfsVolumeId(volume, wanted.onDelete());
        return Bounded.call(deadline, "CreateVolume on " + volume.source(), () -> {
            Export export = exports.open(volume.export(), wanted.mountFlags());
            NfsVolumeRecord record;
            try (TransientLock held = export.lockRecord(volume.subDir(), "volume " + wanted.name(), recordWait)) {
                record = recorded(export, wanted, id);
            }
            if (wanted.source().present()) {
                restore(export, wanted, record);
            }
            Path dir;
            try (TransientLock held = export.lockRecord(volume.subDir(), "volume " + wanted.name(), recordWait)) {
                if (!stillRecorded(export, volume.subDir(), record)) {
                    throw deletedMeanwhile(record);
                }
                dir = export.make(volume.subDir(), wanted.mode());
            }
            boolean enforced = record.getProjectId() != 0;
            if (enforced) {
                quotas.enforce(export, dir, record); // also marks the files a restore or clone copied in
            }
            Volume.Builder reply = Volume.newBuilder()
                    .setVolumeId(id.toString())
                    .setCapacityBytes(wanted.capacityBytes())
                    .putVolumeContext(NfsVolume.SERVER, volume.server())
                    .putVolumeContext(NfsVolume.SHARE, volume.share())
                    .putVolumeContext(NfsVolume.SUB_DIR, volume.subDir())
                    .putVolumeContext(NfsParameters.CAPACITY_ENFORCED, String.valueOf(enforced));
            wanted.mode().ifPresent(mode -> reply.putVolumeContext(MOUNT_PERMISSIONS, FileMode.format(mode)));
            return reply.build();
        });
    }

    /**
     * The volume's record, under its lock: the one there, checked against the request, or a new one
     * written (with a project id of its own where the capacity is enforced).
     */
    private NfsVolumeRecord recorded(Export export, NfsRequest wanted, NfsVolumeId id) throws IOException {
        NfsVolume volume = wanted.volume();
        VolumeRecords records = export.records();
        NfsVolumeRecord record;
        Optional<NfsVolumeRecord> existing = records.read(volume.subDir());
        if (existing.isPresent()) {
            record = existing.get();
            if (!record.getName().equals(wanted.name())) {
                throw CsiException.alreadyExists("subDir " + volume.subDir() + " of " + volume.export().source()
                        + " already belongs to volume " + record.getName() + "; volume " + wanted.name() + " needs another");
            }
            if (record.getCapacityBytes() != wanted.capacityBytes() || !record.getVolumeId().equals(id.toString())) {
                throw CsiException.alreadyExists("volume " + wanted.name() + " exists as " + record.getVolumeId() + " with "
                        + record.getCapacityBytes() + " bytes; asked for " + id + " with " + wanted.capacityBytes() + " bytes");
            }
            if (!record.getSourceSnapshotId().equals(wanted.source().snapshotId())
                    || !record.getSourceVolumeId().equals(wanted.source().volumeId())) {
                throw CsiException.alreadyExists("volume " + wanted.name() + " exists, made from " + recordedSource(record)
                        + "; asked for one made from " + wanted.source());
            }
        } else {
            refuseNesting(records.all(log), volume.subDir());
            if (export.exists(volume.subDir())) {
                if (wanted.source().present()) {
                    throw CsiException.failedPrecondition("subDir " + volume.subDir() + " of " + volume.export().source()
                            + " exists already; a volume made from " + wanted.source() + " needs a directory of its own");
                }
                log.info("volume takes over an existing directory", "volume", wanted.name(), "dir", volume.source());
            }
            if (wanted.source().present()) {
                checkRoom(wanted, export, sourceTree(export, wanted.source()));
            }
            // The record first, with the project id if the capacity is enforced: a crash before the
            // directory is made or limited leaves a record the retry completes.
            record = NfsVolumeRecord.newBuilder()
                    .setVolumeId(id.toString()).setName(wanted.name()).setSubDir(volume.subDir())
                    .setCapacityBytes(wanted.capacityBytes())
                    .setSourceSnapshotId(wanted.source().snapshotId()).setSourceVolumeId(wanted.source().volumeId()).build();
            if (VolumeQuotas.wanted(export, wanted.capacityBytes())) {
                record = quotas.writeWithNewId(export, volume.subDir(), record);
            } else {
                records.write(volume.subDir(), record);
            }
            if (wanted.source().present()) {
                crashes.reach(NfsCrashPoint.RESTORE_RECORDED);
            }
        }
        return record;
    }

    /**
     * Copies the source into {@code .strata-csi/restoring/<key>} and renames the copy into place as
     * the volume's directory, unless a call before this one got that far. A source gone since the
     * record was written (a retry after a crash) undoes the record: NOT_FOUND, nothing left.
     */
    private void restore(Export export, NfsRequest wanted, NfsVolumeRecord record) throws IOException, InterruptedException {
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
                recorded = stillRecorded(export, subDir, record);
                if (recorded) {
                    export.place(partial, subDir);
                }
            }
            if (!recorded) {
                TreeCopy.remove(partial);
                throw deletedMeanwhile(record);
            }
            log.info("volume made from its source", "volume", record.getVolumeId(), "source", wanted.source().toString(),
                    "bytes", copied.bytes(), "entries", copied.entries(), "skipped", copied.skipped(),
                    "attributes_refused", copied.attributesRefused());
            crashes.reach(NfsCrashPoint.RESTORE_PLACED);
        }
    }

    /**
     * Whether the volume's record is still the one this CreateVolume wrote or found, checked under
     * the record's lock before its directory is made or placed. A DeleteVolume can come between
     * (another replica's: the sidecars may lead from different replicas), and the directory would
     * then belong to no volume.
     */
    private static boolean stillRecorded(Export export, String subDir, NfsVolumeRecord record) throws IOException {
        return export.records().read(subDir).filter(found -> found.getVolumeId().equals(record.getVolumeId())).isPresent();
    }

    private static CsiException deletedMeanwhile(NfsVolumeRecord record) {
        return CsiException.aborted("volume " + record.getName() + " was deleted while this call made it; retry to make it again");
    }

    /** The tree a volume is made from: a complete snapshot's copy, or the source volume's directory; NOT_FOUND when gone. */
    private static Path sourceTree(Export export, NfsRequest.ContentSource source) throws IOException {
        if (source.snapshot().isPresent()) {
            NfsSnapshotId id = source.snapshot().get();
            SnapshotStore store = export.snapshots();
            Optional<NfsSnapshotRecord> record = store.read(id.name()).filter(found -> found.getSnapshotId().equals(id.toString()));
            if (record.isEmpty() || record.get().getState() != NfsSnapshotRecord.State.READY) {
                throw CsiException.notFound("snapshot " + id + " does not exist");
            }
            return store.data(id.name());
        }
        NfsVolumeId id = source.volume().orElseThrow();
        Optional<NfsVolumeRecord> record = export.records().read(id.volume().subDir())
                .filter(found -> found.getVolumeId().equals(id.toString()));
        if (record.isEmpty() || !export.exists(id.volume().subDir())) {
            throw CsiException.notFound("source volume " + id + " does not exist");
        }
        return export.directory(id.volume().subDir());
    }

    /**
     * A volume whose capacity is enforced must hold its source's data: a smaller one is
     * OUT_OF_RANGE, since its first write would fail. Without a limit nothing holds it to its size.
     */
    private void checkRoom(NfsRequest wanted, Export export, Path source) throws IOException {
        if (!VolumeQuotas.wanted(export, wanted.capacityBytes())) {
            return;
        }
        long data = wanted.source().snapshot().isPresent()
                ? export.snapshots().read(wanted.source().snapshot().get().name()).orElseThrow().getDataBytes()
                : TreeCopy.bytes(source);
        if (data > wanted.capacityBytes()) {
            throw CsiException.outOfRange("the " + wanted.source() + " holds " + data + " bytes of data; a volume of "
                    + wanted.capacityBytes() + " bytes, its capacity enforced, cannot hold them: ask for at least that");
        }
    }

    private static String recordedSource(NfsVolumeRecord record) {
        return !record.getSourceSnapshotId().isEmpty() ? "snapshot " + record.getSourceSnapshotId()
                : !record.getSourceVolumeId().isEmpty() ? "volume " + record.getSourceVolumeId() : "nothing";
    }

    /**
     * Records the new size, then raises the project quota limit where the volume has one;
     * elsewhere the size is only recorded (nothing enforces it). A share needs nothing on the node.
     */
    @Override
    public Expansion expand(VolumeHandle handle, long bytes, Optional<VolumeCapability> capability) throws Exception {
        NfsVolumeId id = handle.dynamic().orElseThrow(() -> CsiException.notFound("volume "
                + CsiException.printable(handle.volumeId()) + " does not exist"));
        NfsVolume volume = id.volume();
        return Bounded.call(deadline, "ControllerExpandVolume on " + volume.source(), () -> {
            Export export = exports.open(volume.export(), List.of());
            VolumeRecords records = export.records();
            NfsVolumeRecord record;
            try (TransientLock held = export.lockRecord(volume.subDir(), "volume " + id, recordWait)) {
                record = records.read(volume.subDir()).filter(found -> found.getVolumeId().equals(id.toString()))
                        .orElseThrow(() -> CsiException.notFound("volume " + id + " does not exist"));
                if (record.getCapacityBytes() < bytes) {
                    record = record.toBuilder().setCapacityBytes(bytes).build();
                    records.write(volume.subDir(), record); // the size first: the retry raises the limit to it
                    log.info("volume expanded", "volume", id, "bytes", bytes, "enforced", record.getProjectId() != 0);
                }
                if (record.getProjectId() != 0) { // under the lock: a DeleteVolume in between would leave the directory made again
                    quotas.enforce(export, export.make(volume.subDir(), Optional.empty()), record);
                }
            }
            return new Expansion(record.getCapacityBytes(), false);
        });
    }

    /** Frees the volume as its onDelete says. An id of a volume already gone succeeds. */
    @Override
    public void delete(VolumeHandle handle) throws Exception {
        NfsVolumeId id = handle.dynamic().orElseThrow();
        NfsVolume volume = id.volume();
        Bounded.call(deadline, "DeleteVolume on " + volume.source(), () -> {
            Export export = exports.open(volume.export(), List.of());
            VolumeRecords records = export.records();
            String key = VolumeRecords.key(volume.subDir());
            try (TransientLock held = export.lockRecord(volume.subDir(), "volume " + id, recordWait)) {
                Optional<NfsVolumeRecord> record = records.read(volume.subDir());
                // A record of another id means the directory was given to another volume since: not ours to touch.
                if (record.isPresent() && record.get().getVolumeId().equals(id.toString())) {
                    // The limit goes first, archived or retained data included (nothing writes there
                    // any more); the record, which holds the project id, goes last.
                    quotas.release(export, record.get());
                    switch (id.onDelete()) {
                        case DELETE -> {
                            export.emptyTrash(key); // what an earlier volume of this directory left there
                            export.moveToTrash(volume.subDir(), key);
                        }
                        case ARCHIVE -> {
                            var archived = export.archive(volume.subDir(), clock.instant());
                            log.info("archived volume", "volume", id, "archive", archived);
                        }
                        case RETAIN -> log.info("retained volume directory", "volume", id, "dir", volume.source());
                    }
                    records.delete(volume.subDir());
                }
            }
            if (id.onDelete() == OnDelete.DELETE) {
                export.emptyTrash(key); // also finishes a removal a crash or a deadline interrupted
            }
            if (Files.isDirectory(export.restoring(), LinkOption.NOFOLLOW_LINKS)) {
                // A restore or clone a crash cut short, and never retried: its partial copy goes with the volume.
                try (TransientLock held = export.lockCopy(export.restoringLock(key), "volume " + id)) {
                    TreeCopy.remove(export.restoringCopy(key));
                }
            }
            return null;
        });
    }

    /**
     * Checks that the volume exists and records the node. A static volume (a PersistentVolume
     * written by hand) is known by its volume context; its record is kept only while it is
     * published, and only where controller-server reaches the export: attaching it never depends
     * on that.
     */
    @Override
    public Map<String, String> publish(VolumeHandle handle, String nodeId, VolumeCapability capability) throws Exception {
        String volumeId = handle.volumeId();
        Optional<NfsVolumeId> dynamic = handle.dynamic();
        NfsVolume volume = handle.volume().orElseThrow();
        String subDir = dynamic.isPresent() ? volume.subDir() : staticKey(volumeId);
        Bounded.call(deadline, "ControllerPublishVolume on " + volume.source(), () -> {
            Export export;
            try {
                export = exports.open(volume.export(), capability.getMount().getMountFlagsList());
            } catch (CsiException e) {
                if (dynamic.isPresent()) {
                    throw e;
                }
                log.warn("static NFS volume published without bookkeeping: export not reachable", "volume", volumeId,
                        "error", e.getMessage());
                return null;
            }
            VolumeRecords records = export.records();
            try (TransientLock held = export.lockRecord(subDir, "volume " + volumeId, recordWait)) {
                Optional<NfsVolumeRecord> record = records.read(subDir);
                if (dynamic.isPresent() && (record.isEmpty() || !record.get().getVolumeId().equals(volumeId)
                        || !export.exists(volume.subDir()))) {
                    throw CsiException.notFound("volume " + volumeId + " does not exist");
                }
                NfsVolumeRecord current = record.orElseGet(() -> NfsVolumeRecord.newBuilder()
                        .setVolumeId(volumeId).setSubDir(volume.subDir()).build());
                if (!current.getPublishedNodeIdsList().contains(nodeId)) {
                    records.write(subDir, current.toBuilder().addPublishedNodeIds(nodeId).build());
                }
            }
            return null;
        });
        return Map.of(); // nothing for the node: the volume context says where the share is
    }

    /** Forgets the node. For a static volume the record is looked for in the exports mounted now; none found is success. */
    @Override
    public void unpublish(VolumeHandle handle, String nodeId) throws Exception {
        String volumeId = handle.volumeId();
        Optional<NfsVolumeId> dynamic = handle.dynamic();
        Bounded.call(deadline, "ControllerUnpublishVolume of " + volumeId, () -> {
            List<Export> candidates = dynamic.isPresent()
                    ? List.of(exports.open(dynamic.get().volume().export(), List.of()))
                    : exports.mounted();
            String subDir = dynamic.map(id -> id.volume().subDir()).orElse(staticKey(volumeId));
            for (Export export : candidates) {
                VolumeRecords records = export.records();
                // Only an export that holds the record gets a lock file (a static volume's candidates are every export).
                if (records.read(subDir).filter(found -> found.getVolumeId().equals(volumeId)).isPresent()) {
                    try (TransientLock held = export.lockRecord(subDir, "volume " + volumeId, recordWait)) {
                        forget(records, subDir, volumeId, nodeId, dynamic.isEmpty());
                    }
                }
            }
            return null;
        });
    }

    /** Takes {@code nodeId} (every node, when empty) out of the record; a static volume's record goes with its last node. */
    private static void forget(VolumeRecords records, String subDir, String volumeId, String nodeId, boolean isStatic) throws IOException {
        Optional<NfsVolumeRecord> record = records.read(subDir);
        if (record.isEmpty() || !record.get().getVolumeId().equals(volumeId)) {
            return;
        }
        List<String> nodes = new ArrayList<>(record.get().getPublishedNodeIdsList());
        if (nodeId.isEmpty() ? nodes.isEmpty() : !nodes.remove(nodeId)) {
            return;
        }
        if (nodeId.isEmpty()) {
            nodes.clear();
        }
        if (isStatic && nodes.isEmpty()) {
            records.delete(subDir);
        } else {
            records.write(subDir, record.get().toBuilder().clearPublishedNodeIds().addAllPublishedNodeIds(nodes).build());
        }
    }

    /**
     * Whether the volume exists: a dynamic one has its record; a static one is taken as its
     * context describes it. Of the StorageClass parameters only their keys are looked at, as
     * CreateVolume does ({@link NfsParameters#STORAGE_CLASS}).
     */
    @Override
    public Optional<String> validate(VolumeHandle handle, Map<String, String> parameters) throws Exception {
        if (handle.dynamic().isEmpty()) {
            return NfsParameters.STORAGE_CLASS.problem(parameters);
        }
        NfsVolume volume = handle.dynamic().get().volume();
        Bounded.call(deadline, "looking up " + volume.source(), () -> {
            Export export = exports.open(volume.export(), List.of());
            var record = export.records().read(volume.subDir());
            if (record.isEmpty() || !record.get().getVolumeId().equals(handle.volumeId())) {
                throw CsiException.notFound("volume " + handle.volumeId() + " does not exist");
            }
            return null;
        });
        return NfsParameters.STORAGE_CLASS.problem(parameters);
    }

    @Override
    public Optional<String> snapshotName(String snapshotId) {
        return NfsSnapshotId.parse(snapshotId).map(NfsSnapshotId::name);
    }

    /**
     * Copies the volume's directory into the export's driver directory (see {@link TreeCopy}): the
     * record first (CREATING), then the copy into {@code <key>.partial/}, renamed into place once
     * complete, then the record READY. Only a READY snapshot is reported; a retry of a snapshot cut
     * short copies afresh. No freeze exists over NFS: a file written during the copy is copied as it
     * was when read.
     */
    @Override
    public Snapshot createSnapshot(VolumeHandle handle, String name, Map<String, String> parameters) throws Exception {
        NfsSnapshotId.checkName(name);
        NfsParameters.SNAPSHOT_CLASS.require(parameters);
        NfsVolumeId source = handle.dynamic().orElseThrow();
        NfsVolume volume = source.volume();
        NfsSnapshotId id = new NfsSnapshotId(volume.export(), name);
        return Bounded.call(deadline, "CreateSnapshot " + name + " of " + volume.source(), () -> {
            Export export = exports.open(volume.export(), List.of());
            SnapshotStore store = export.snapshots();
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
                Optional<NfsVolumeRecord> sourceRecord = export.records().read(volume.subDir())
                        .filter(found -> found.getVolumeId().equals(source.toString()));
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
    @Override
    public void deleteSnapshot(String snapshotId) throws Exception {
        NfsSnapshotId id = NfsSnapshotId.parse(snapshotId).orElseThrow();
        Bounded.call(deadline, "DeleteSnapshot " + id.name() + " on " + id.export().source(), () -> {
            Export export = exports.open(id.export(), List.of());
            SnapshotStore store = export.snapshots();
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
    @Override
    public List<Snapshot> snapshots() throws Exception {
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

    /**
     * At start: removes the partial copies a crash left in the exports mounted now, so their space
     * comes back before any retry (which would copy afresh anyway). A copy whose lock is held is
     * being made and stays; the records stay for the retries. Returns how many were removed.
     */
    public int removePartialCopies() throws Exception {
        return Bounded.call(deadline, "removing partial NFS copies", () -> {
            int removed = 0;
            for (Export export : exports.mounted()) {
                SnapshotStore store = export.snapshots();
                for (NfsSnapshotRecord record : store.all(log)) {
                    if (record.getState() == NfsSnapshotRecord.State.CREATING
                            && removeUnlocked(export, store.partial(record.getName()), store.lock(record.getName()))) {
                        removed++;
                    }
                }
                // A partial copy is named by its volume's key; anything else there is not one: a
                // lock file, or the .nfsXXXX name an NFS client gives a file removed while open.
                for (String entry : entries(export.restoring())) {
                    if (VolumeRecords.isKey(entry) && removeUnlocked(export, export.restoringCopy(entry),
                            export.restoringLock(entry))) {
                        removed++;
                    }
                }
            }
            log.info("partial NFS copies removed", "count", removed);
            return removed;
        });
    }

    private boolean removeUnlocked(Export export, Path copy, Path lock) throws IOException {
        if (!Files.exists(copy, LinkOption.NOFOLLOW_LINKS)) {
            return false;
        }
        try (TransientLock held = export.lockCopy(lock, copy.toString())) {
            TreeCopy.remove(copy);
            log.info("removed a partial copy a crash left", "path", copy);
            return true;
        } catch (CsiException busy) {
            return false; // a call of this or another replica is making it
        }
    }

    private static List<String> entries(Path dir) throws IOException {
        if (!Files.isDirectory(dir, LinkOption.NOFOLLOW_LINKS)) {
            return List.of();
        }
        try (var stream = Files.list(dir)) {
            return stream.map(path -> path.getFileName().toString()).toList();
        }
    }

    private static Snapshot snapshot(NfsSnapshotRecord record) {
        return Snapshot.newBuilder().setSnapshotId(record.getSnapshotId()).setSourceVolumeId(record.getSourceVolumeId())
                .setSizeBytes(record.getSizeBytes()).setReadyToUse(true)
                .setCreationTime(Timestamp.newBuilder().setSeconds(record.getCreationTimeSeconds()).setNanos(record.getCreationTimeNanos()))
                .build();
    }

    /** The NFS volumes of every export mounted now, for ListVolumes. */
    @Override
    public List<ListVolumesResponse.Entry> list() throws Exception {
        return Bounded.call(deadline, "listing NFS volumes", () -> {
            List<ListVolumesResponse.Entry> entries = new ArrayList<>();
            for (Export export : exports.mounted()) {
                for (NfsVolumeRecord record : export.records().all(log)) {
                    entries.add(ListVolumesResponse.Entry.newBuilder()
                            .setVolume(Volume.newBuilder().setVolumeId(record.getVolumeId()).setCapacityBytes(record.getCapacityBytes()))
                            .setStatus(ListVolumesResponse.VolumeStatus.newBuilder().addAllPublishedNodeIds(record.getPublishedNodeIdsList()))
                            .build());
                }
            }
            return entries;
        });
    }

    /** Free space of the export a StorageClass names, for GetCapacity: an export is reachable from every node. */
    @Override
    public long availableBytes(GetCapacityRequest request) throws Exception {
        Map<String, String> parameters = request.getParametersMap();
        NfsVolume export = NfsVolume.fromContext(Map.of(
                NfsVolume.SERVER, parameters.getOrDefault(NfsVolume.SERVER, ""),
                NfsVolume.SHARE, parameters.getOrDefault(NfsVolume.SHARE, ""))).orElseThrow();
        try {
            long available = Bounded.call(deadline, "GetCapacity of " + export.source(),
                    () -> exports.open(export, List.of()).availableBytes());
            exports.metrics().answered(export, available);
            return available;
        } catch (CsiException e) {
            if (e.code() == io.grpc.Status.Code.UNAVAILABLE) {
                exports.metrics().unreachable(export);
            }
            throw e;
        }
    }

    /** A directory can hold one volume, and one volume's directory cannot hold another's: deleting one would take the other's data. */
    private static void refuseNesting(List<NfsVolumeRecord> records, String subDir) {
        for (NfsVolumeRecord record : records) {
            String other = record.getSubDir();
            if (!other.isEmpty() && (other.startsWith(subDir + "/") || subDir.startsWith(other + "/"))) {
                throw CsiException.failedPrecondition("subDir " + subDir + " would nest with the directory " + other
                        + " of volume " + record.getVolumeId() + "; deleting one would take the other's data");
            }
        }
    }

    /** Where a static volume's record is kept: a key no directory can have, since a subDir holds no NUL. */
    private static String staticKey(String volumeId) {
        return "static\0" + volumeId;
    }

    private static String lockKey(NfsVolume volume) {
        return "nfs " + volume.source();
    }

}
