package dev.strata.csi.backend.nfs;

import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCapability.AccessMode;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.rpc.CsiException;
import java.util.Optional;
import java.util.Set;

/**
 * What an NFS volume can be: a shared directory, so every access mode, many nodes at once, but
 * only mount access (there is no block device) and no filesystem of the driver's choosing.
 */
public final class NfsCapabilities implements Capabilities {

    private static final Set<String> FS_TYPES = Set.of("", "nfs", "nfs4");

    private static final Set<AccessMode.Mode> READ_ONLY = Set.of(
            AccessMode.Mode.SINGLE_NODE_READER_ONLY, AccessMode.Mode.MULTI_NODE_READER_ONLY);

    @Override
    public Optional<String> unsupported(VolumeCapability capability) {
        AccessMode.Mode mode = capability.getAccessMode().getMode();
        if (mode == AccessMode.Mode.UNKNOWN || mode == AccessMode.Mode.UNRECOGNIZED) {
            return Optional.of("access mode " + mode + " is not supported");
        }
        return switch (capability.getAccessTypeCase()) {
            case BLOCK -> Optional.of("an NFS volume is a directory; block access is not supported");
            case MOUNT -> FS_TYPES.contains(capability.getMount().getFsType()) ? Optional.empty()
                    : Optional.of("filesystem type '" + CsiException.printable(capability.getMount().getFsType())
                            + "' does not fit an NFS volume; leave it empty or use nfs or nfs4");
            default -> Optional.of("volume capability has no access type (mount or block)");
        };
    }

    /** Whether the access mode lets nobody write: the share is then mounted read-only. */
    @Override
    public boolean readOnly(VolumeCapability capability) {
        return READ_ONLY.contains(capability.getAccessMode().getMode());
    }
}
