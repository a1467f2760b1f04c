package dev.strata.csi.backend.nfs;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.backend.ControllerBackend;
import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Bounded;
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
 * export's filesystem has them (see {@link VolumeQuotas}). Publishing touches no storage: it
 * checks the volume and keeps the record of nodes for ListVolumes. Every step on an export runs
 * with a deadline (see {@link Bounded}).
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
    public static final String CAPACITY_ENFORCED = "capacityEnforced";

    private final Exports exports;
    private final VolumeQuotas quotas;
    private final Duration deadline;
    private final Clock clock;
    private final Log log;
    private final NfsCapabilities capabilities = new NfsCapabilities();

    public NfsController(Exports exports, ProjectQuotas quotas, Duration deadline, Clock clock, Log log) {
        this.exports = exports;
        this.quotas = new VolumeQuotas(quotas, log);
        this.deadline = deadline;
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
    public Optional<VolumeHandle> byIdOnly(String volumeId) {
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
    public NfsRequest check(CreateVolumeRequest request) {
        return NfsRequest.of(request);
    }

    @Override
    public String createLockKey(NfsRequest request) {
        return lockKey(request.volume());
    }

    @Override
    public Volume create(NfsRequest wanted) throws Exception {
        NfsVolume volume = wanted.volume();
        NfsVolumeId id = new NfsVolumeId(volume, wanted.onDelete());
        return Bounded.call(deadline, "CreateVolume on " + volume.source(), () -> {
            Export export = exports.open(volume.export(), wanted.mountFlags());
            VolumeRecords records = export.records();
            Optional<NfsVolumeRecord> existing = records.read(volume.subDir());
            NfsVolumeRecord record;
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
            } else {
                refuseNesting(records.all(log), volume.subDir());
                if (export.exists(volume.subDir())) {
                    log.info("volume takes over an existing directory", "volume", wanted.name(), "dir", volume.source());
                }
                // The record first, with the project id if the capacity is enforced: a crash before the
                // directory is made or limited leaves a record the retry completes.
                record = NfsVolumeRecord.newBuilder()
                        .setVolumeId(id.toString()).setName(wanted.name()).setSubDir(volume.subDir())
                        .setCapacityBytes(wanted.capacityBytes()).build();
                if (VolumeQuotas.wanted(export, wanted.capacityBytes())) {
                    record = quotas.writeWithNewId(export, volume.subDir(), record);
                } else {
                    records.write(volume.subDir(), record);
                }
            }
            var dir = export.make(volume.subDir(), wanted.mode());
            boolean enforced = record.getProjectId() != 0;
            if (enforced) {
                quotas.enforce(export, dir, record);
            }
            Volume.Builder reply = Volume.newBuilder()
                    .setVolumeId(id.toString())
                    .setCapacityBytes(wanted.capacityBytes())
                    .putVolumeContext(NfsVolume.SERVER, volume.server())
                    .putVolumeContext(NfsVolume.SHARE, volume.share())
                    .putVolumeContext(NfsVolume.SUB_DIR, volume.subDir())
                    .putVolumeContext(CAPACITY_ENFORCED, String.valueOf(enforced));
            wanted.mode().ifPresent(mode -> reply.putVolumeContext(MOUNT_PERMISSIONS, FileMode.format(mode)));
            return reply.build();
        });
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
            NfsVolumeRecord record = records.read(volume.subDir()).filter(found -> found.getVolumeId().equals(id.toString()))
                    .orElseThrow(() -> CsiException.notFound("volume " + id + " does not exist"));
            if (record.getCapacityBytes() < bytes) {
                record = record.toBuilder().setCapacityBytes(bytes).build();
                records.write(volume.subDir(), record); // the size first: the retry raises the limit to it
                log.info("volume expanded", "volume", id, "bytes", bytes, "enforced", record.getProjectId() != 0);
            }
            if (record.getProjectId() != 0) {
                quotas.enforce(export, export.make(volume.subDir(), Optional.empty()), record);
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
            if (id.onDelete() == OnDelete.DELETE) {
                export.emptyTrash(key); // also finishes a removal a crash or a deadline interrupted
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
                Optional<NfsVolumeRecord> record = records.read(subDir);
                if (record.isEmpty() || !record.get().getVolumeId().equals(volumeId)) {
                    continue;
                }
                List<String> nodes = new ArrayList<>(record.get().getPublishedNodeIdsList());
                if (nodeId.isEmpty() ? nodes.isEmpty() : !nodes.remove(nodeId)) {
                    continue;
                }
                if (nodeId.isEmpty()) {
                    nodes.clear();
                }
                if (dynamic.isEmpty() && nodes.isEmpty()) {
                    records.delete(subDir);
                } else {
                    records.write(subDir, record.get().toBuilder().clearPublishedNodeIds().addAllPublishedNodeIds(nodes).build());
                }
            }
            return null;
        });
    }

    /**
     * Whether the volume exists: a dynamic one has its record; a static one is taken as its
     * context describes it. The StorageClass parameters are not looked at.
     */
    @Override
    public Optional<String> validate(VolumeHandle handle, Map<String, String> parameters) throws Exception {
        if (handle.dynamic().isEmpty()) {
            return Optional.empty();
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
        return Optional.empty();
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
