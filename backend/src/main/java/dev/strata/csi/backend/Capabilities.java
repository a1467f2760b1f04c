package dev.strata.csi.backend;

import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCapability.AccessMode;
import dev.strata.csi.rpc.CsiException;
import java.util.List;
import java.util.Optional;

/**
 * What the volumes of one backend can be (access modes, block or mount, filesystems): answered
 * by the backend, so the CSI services hold no backend's rules. Expansion and snapshots come here
 * when a backend supports them.
 */
public interface Capabilities {

    /** Why the capability cannot be served, or empty when it can. */
    Optional<String> unsupported(VolumeCapability capability);

    /** Whether the access mode lets nobody write: the volume is then mounted read-only. */
    boolean readOnly(VolumeCapability capability);

    /** INVALID_ARGUMENT for an empty list, or the reason {@link #unsupported} gives for the first capability it refuses. */
    default void require(List<VolumeCapability> capabilities, String field) {
        if (capabilities.isEmpty()) {
            throw CsiException.missing(field);
        }
        for (VolumeCapability capability : capabilities) {
            unsupported(capability).ifPresent(reason -> {
                throw CsiException.invalidArgument(reason);
            });
        }
    }

    /** Whether only one pod may write (ReadWriteOncePod): then the volume is published at one target only. */
    static boolean singleWriter(VolumeCapability capability) {
        return capability.getAccessMode().getMode() == AccessMode.Mode.SINGLE_NODE_SINGLE_WRITER;
    }
}
