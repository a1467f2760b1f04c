package dev.strata.csi.node.local.lvm;

import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.BlockRange;
import java.util.List;

/**
 * What the thin pool's metadata says of its thin devices (by thin device id,
 * {@link LogicalVolumes#thinId}), read from a metadata snapshot while the pool runs: never a read
 * of a volume's data. Ranges in bytes, whole chunks of the pool, in ascending order. The real one
 * is {@link SystemThinMappings} (thin-provisioning-tools); unit tests use an in-memory stand-in.
 */
public interface ThinMappings {

    /** The chunks device {@code id} maps (has written, or shares with its origin). */
    List<BlockRange> mapped(long id) throws DeviceException;

    /**
     * The chunks where devices {@code base} and {@code target} map differently: mapped to other
     * data, or mapped in one only (thin_delta's different, left_only and right_only).
     */
    List<BlockRange> differing(long base, long target) throws DeviceException;
}
