package dev.strata.csi.backend.local;

import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCapability.AccessMode;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.rpc.CsiException;
import java.util.Optional;
import java.util.Set;

/**
 * What a local volume can be: one node's disk, so only single-node access modes; a filesystem
 * (ext4, xfs, btrfs) or a raw block device.
 */
public final class LocalCapabilities implements Capabilities {

    public static final String DEFAULT_FS_TYPE = "ext4";
    public static final Set<String> FS_TYPES = Set.of("ext4", "xfs", "btrfs");

    private static final Set<AccessMode.Mode> MODES = Set.of(
            AccessMode.Mode.SINGLE_NODE_WRITER,
            AccessMode.Mode.SINGLE_NODE_READER_ONLY,
            AccessMode.Mode.SINGLE_NODE_SINGLE_WRITER,
            AccessMode.Mode.SINGLE_NODE_MULTI_WRITER);

    /** Why the capability cannot be served, or empty when it can. */
    @Override
    public Optional<String> unsupported(VolumeCapability capability) {
        AccessMode.Mode mode = capability.getAccessMode().getMode();
        if (!MODES.contains(mode)) {
            return Optional.of("access mode " + mode + " is not supported: a local volume lives on one node");
        }
        return switch (capability.getAccessTypeCase()) {
            case BLOCK -> Optional.empty();
            case MOUNT -> {
                String fsType = capability.getMount().getFsType();
                yield fsType.isEmpty() || FS_TYPES.contains(fsType) ? Optional.empty()
                        : Optional.of("filesystem type '" + CsiException.printable(fsType) + "' is not supported; use one of " + FS_TYPES);
            }
            default -> Optional.of("volume capability has no access type (mount or block)");
        };
    }

    /** Read-only on one node (ReadOnlyMany on one node): mounted read-only, never formatted. */
    @Override
    public boolean readOnly(VolumeCapability capability) {
        return capability.getAccessMode().getMode() == AccessMode.Mode.SINGLE_NODE_READER_ONLY;
    }

    public static boolean isBlock(VolumeCapability capability) {
        return capability.hasBlock();
    }

    public static String fsType(VolumeCapability capability) {
        String fsType = capability.getMount().getFsType();
        return fsType.isEmpty() ? DEFAULT_FS_TYPE : fsType;
    }
}
