package dev.strata.csi.controller.nfs;

import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Bounded;
import dev.strata.csi.system.TransientLock;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The nodes an NFS volume is published to, kept in its record for ListVolumes: publishing touches
 * no storage. ControllerPublishVolume and ControllerUnpublishVolume of {@link NfsController} come
 * here; each change of a record is made under the record's lock ({@link Export#lockRecord}).
 */
final class Publications {

    private final Exports exports;
    private final Duration deadline;
    private final Duration recordWait;
    private final Log log;

    Publications(Exports exports, Duration deadline, Duration recordWait, Log log) {
        this.exports = exports;
        this.deadline = deadline;
        this.recordWait = recordWait;
        this.log = log;
    }

    /**
     * Checks that the volume exists and records the node. A static volume (a PersistentVolume
     * written by hand) is known by its volume context; its record is kept only while it is
     * published, and only where controller-server reaches the export: attaching it never depends
     * on that.
     */
    void publish(NfsController.VolumeHandle handle, String nodeId, VolumeCapability capability) throws Exception {
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
    }

    /** Forgets the node. For a static volume the record is looked for in the exports mounted now; none found is success. */
    void unpublish(NfsController.VolumeHandle handle, String nodeId) throws Exception {
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
                if (records.readOf(subDir, volumeId).isPresent()) {
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

    /** Where a static volume's record is kept: a key no directory can have, since a subDir holds no NUL. */
    private static String staticKey(String volumeId) {
        return "static\0" + volumeId;
    }

}
