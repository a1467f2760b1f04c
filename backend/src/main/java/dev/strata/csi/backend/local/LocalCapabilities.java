package dev.strata.csi.backend.local;

import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCapability.AccessMode;
import dev.strata.csi.rpc.CsiException;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

/**
 * What a local volume can be: one node's disk, so only single-node access modes; a filesystem
 * (ext4, xfs, btrfs) or a raw block device.
 */
public final class LocalCapabilities {

    public static final String DEFAULT_FS_TYPE = "ext4";
    public static final Set<String> FS_TYPES = Set.of("ext4", "xfs", "btrfs");

    private static final Set<AccessMode.Mode> MODES = Set.of(
            AccessMode.Mode.SINGLE_NODE_WRITER,
            AccessMode.Mode.SINGLE_NODE_READER_ONLY,
            AccessMode.Mode.SINGLE_NODE_SINGLE_WRITER,
            AccessMode.Mode.SINGLE_NODE_MULTI_WRITER);

    private LocalCapabilities() {}

    /** Why the capability cannot be served, or empty when it can. */
    public static Optional<String> unsupported(VolumeCapability capability) {
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

    /** INVALID_ARGUMENT unless every capability can be served; {@code field} names the request field. */
    public static void require(List<VolumeCapability> capabilities, String field) {
        requireEach(capabilities, field, LocalCapabilities::unsupported);
    }

    /** INVALID_ARGUMENT for an empty list, or the reason {@code unsupported} gives for the first capability it refuses. */
    public static void requireEach(List<VolumeCapability> capabilities, String field, Function<VolumeCapability, Optional<String>> unsupported) {
        if (capabilities.isEmpty()) {
            throw CsiException.missing(field);
        }
        for (VolumeCapability capability : capabilities) {
            unsupported.apply(capability).ifPresent(reason -> {
                throw CsiException.invalidArgument(reason);
            });
        }
    }

    public static boolean isBlock(VolumeCapability capability) {
        return capability.hasBlock();
    }

    public static String fsType(VolumeCapability capability) {
        String fsType = capability.getMount().getFsType();
        return fsType.isEmpty() ? DEFAULT_FS_TYPE : fsType;
    }

    public static boolean singleWriter(VolumeCapability capability) {
        return capability.getAccessMode().getMode() == AccessMode.Mode.SINGLE_NODE_SINGLE_WRITER;
    }

    public static boolean readOnlyMode(VolumeCapability capability) {
        return capability.getAccessMode().getMode() == AccessMode.Mode.SINGLE_NODE_READER_ONLY;
    }
}
