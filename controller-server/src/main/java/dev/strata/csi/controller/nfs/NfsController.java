package dev.strata.csi.controller.nfs;

import csi.v1.Csi.ControllerServiceCapability;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.nfs.FileMode;
import dev.strata.csi.backend.nfs.NfsParameters;
import dev.strata.csi.backend.nfs.NfsSnapshotId;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.backend.nfs.NfsVolumeScheme;
import dev.strata.csi.backend.nfs.OnDelete;
import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.controller.backend.ControllerBackend;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Bounded;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.system.TransientLock;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The Controller service's work for NFS volumes. A volume is a directory of an export; its record
 * (name, capacity, project quota id, the nodes it is published to) lives in the export too, so the
 * controller keeps nothing of its own. The capacity is enforced with a project quota where the
 * export's filesystem has them (see {@link VolumeQuotas}). Every step on an export runs with a
 * deadline (see {@link Bounded}). Each change of a record is made under the record's lock
 * ({@link Export#lockRecord}), which holds between controller-server replicas. This class keeps
 * the volumes' lifecycle (create, expand, delete, validate, list, capacity); the jobs beside it
 * have a class each: the nodes a volume is published to ({@link Publications}), volumes made from
 * a content source ({@link ContentSources}), snapshots ({@link NfsSnapshots}).
 */
public final class NfsController implements ControllerBackend<NfsController.VolumeHandle, NfsRequest>,
        NfsVolumeScheme<NfsController.VolumeHandle> {

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
    private final Crashes<NfsCrashPoint> crashes;
    private final NfsSnapshots snapshots;
    private final Publications publications;
    private final ContentSources sources;

    public NfsController(Exports exports, ProjectQuotas quotas, Duration deadline, Clock clock, Crashes<NfsCrashPoint> crashes, Log log) {
        this.exports = exports;
        this.crashes = crashes;
        this.quotas = new VolumeQuotas(quotas, log);
        this.deadline = deadline;
        this.recordWait = deadline.dividedBy(2);
        this.clock = clock;
        this.log = log;
        this.publications = new Publications(exports, deadline, recordWait, log);
        this.snapshots = new NfsSnapshots(exports, deadline, clock, crashes, log);
        this.sources = new ContentSources(this.quotas, recordWait, crashes, log);
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
        checkMutableParameters(request.getMutableParamsMap());
        return NfsRequest.of(request);
    }

    @Override
    public String createLockKey(NfsRequest request) {
        return lockKey(request.volume());
    }

    /**
     * Makes the volume's directory, or, from a content source, a copy of the source in the driver's
     * directory renamed into place once complete (see {@link ContentSources}); the record, written first,
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
                sources.restore(export, wanted, record);
            }
            Path dir;
            try (TransientLock held = export.lockRecord(volume.subDir(), "volume " + wanted.name(), recordWait)) {
                if (!export.records().holds(volume.subDir(), record)) {
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
                ContentSources.checkRoom(export, wanted);
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

    static CsiException deletedMeanwhile(NfsVolumeRecord record) {
        return CsiException.aborted("volume " + record.getName() + " was deleted while this call made it; retry to make it again");
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
                record = records.readOf(volume.subDir(), id.toString())
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

    /** Checks that the volume exists and records the node (see {@link Publications}). */
    @Override
    public Map<String, String> publish(VolumeHandle handle, String nodeId, VolumeCapability capability) throws Exception {
        publications.publish(handle, nodeId, capability);
        return Map.of(); // nothing for the node: the volume context says where the share is
    }

    @Override
    public void unpublish(VolumeHandle handle, String nodeId) throws Exception {
        publications.unpublish(handle, nodeId);
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

    @Override
    public Snapshot createSnapshot(VolumeHandle handle, String name, Map<String, String> parameters) throws Exception {
        return snapshots.create(handle.dynamic().orElseThrow(), name, parameters);
    }

    @Override
    public void deleteSnapshot(String snapshotId) throws Exception {
        snapshots.delete(NfsSnapshotId.parse(snapshotId).orElseThrow());
    }

    @Override
    public List<Snapshot> snapshots() throws Exception {
        return snapshots.list();
    }

    /**
     * At start: removes the partial copies (of snapshots, restores and clones) a crash left in the
     * exports mounted now, so their space comes back before any retry (which would copy afresh
     * anyway). A copy whose lock is held is being made and stays; the records stay for the
     * retries. Returns how many were removed.
     */
    public int removePartialCopies() throws Exception {
        return Bounded.call(deadline, "removing partial NFS copies", () -> {
            int removed = 0;
            for (Export export : exports.mounted()) {
                removed += snapshots.removePartialCopies(export) + sources.removePartialCopies(export);
            }
            log.info("partial NFS copies removed", "count", removed);
            return removed;
        });
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

    private static String lockKey(NfsVolume volume) {
        return "nfs " + volume.source();
    }

}
