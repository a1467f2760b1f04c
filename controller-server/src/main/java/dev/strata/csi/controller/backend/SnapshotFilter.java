package dev.strata.csi.controller.backend;

import csi.v1.Csi.Snapshot;

/** ListSnapshots' filters: a snapshot id, a source volume id; an empty one asks for any. */
public record SnapshotFilter(String snapshotId, String sourceVolumeId) {

    public boolean matches(Snapshot snapshot) {
        return (snapshotId.isEmpty() || snapshot.getSnapshotId().equals(snapshotId))
                && (sourceVolumeId.isEmpty() || snapshot.getSourceVolumeId().equals(sourceVolumeId));
    }
}
