package dev.strata.csi.controller.local;

import dev.strata.csi.system.Crashes;
import java.util.Set;

/**
 * The places between two steps of a snapshot's copies to other nodes (VolumeSnapshotClass
 * parameter copies) where a crash of controller-server leaves something half done, as
 * node-server's CrashPoint names those of the node: with {@link Crashes} armed at one,
 * controller-server halts there, and the crash test checks that the retried call or the next
 * start completes or undoes the operation. The name says the step just done.
 */
public enum LocalCrashPoint {
    /** The snapshot taken with the nodes to keep its copies recorded on its node; no copy started. */
    COPY_PLANNED,
    /** A copy's content relayed and verified by the node that keeps it; not yet entered as complete here. */
    COPY_RELAYED,
    /** DeleteSnapshot: a copy on another node deleted; the snapshot on its own node not yet. */
    COPY_REMOTE_DELETED;

    /** Every point's name: controller-server's other crash points (NFS's) arm none of these. */
    public static Set<String> names() {
        return java.util.stream.Stream.of(values()).map(Enum::name).collect(java.util.stream.Collectors.toSet());
    }
}
