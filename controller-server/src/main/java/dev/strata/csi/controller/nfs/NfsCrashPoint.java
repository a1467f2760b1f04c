package dev.strata.csi.controller.nfs;

import dev.strata.csi.system.Crashes;
import java.util.Set;

/**
 * The places between two steps of a multi-step NFS snapshot, restore or clone where a crash leaves
 * something half done, as node-server's CrashPoint names those of local volumes: with
 * {@link Crashes} armed at one, controller-server halts there, and the fault-injection test
 * checks that the retried call completes or undoes the operation. The name says the operation and
 * the step just done.
 */
public enum NfsCrashPoint {
    SNAPSHOT_RECORDED,
    SNAPSHOT_COPIED,
    SNAPSHOT_PLACED,
    DELETE_SNAPSHOT_RECORDED,
    DELETE_SNAPSHOT_DISCARDED,
    RESTORE_RECORDED,
    RESTORE_COPIED,
    RESTORE_PLACED;

    /** Every point's name: controller-server's other crash points (the local backend's) arm none of these. */
    public static Set<String> names() {
        return java.util.stream.Stream.of(values()).map(Enum::name).collect(java.util.stream.Collectors.toSet());
    }
}
