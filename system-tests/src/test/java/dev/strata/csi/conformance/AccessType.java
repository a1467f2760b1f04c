package dev.strata.csi.conformance;

import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCapability.AccessMode;
import java.util.List;
import java.util.Locale;

/**
 * How a volume is consumed, the one choice of volume capability the suite varies: a filesystem
 * (fs_type left to the driver's default) or a raw block device, both single-node writer.
 */
enum AccessType {
    MOUNT,
    BLOCK;

    VolumeCapability capability() {
        VolumeCapability.Builder capability = VolumeCapability.newBuilder()
                .setAccessMode(AccessMode.newBuilder().setMode(AccessMode.Mode.SINGLE_NODE_WRITER));
        return switch (this) {
            case MOUNT -> capability.setMount(VolumeCapability.MountVolume.getDefaultInstance()).build();
            case BLOCK -> capability.setBlock(VolumeCapability.BlockVolume.getDefaultInstance()).build();
        };
    }

    /** {@code mount}, {@code block}, or empty for both (the default: a driver may offer either). */
    static List<AccessType> parse(String value) {
        if (value == null || value.isBlank()) {
            return List.of(values());
        }
        try {
            return List.of(valueOf(value.strip().toUpperCase(Locale.ROOT)));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("conformance.accessType must be mount or block, got '" + value + "'");
        }
    }
}
