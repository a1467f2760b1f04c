package dev.strata.csi.node.local.fs;

import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;
import java.util.Optional;

/**
 * What {@code blkid -p} finds on a device: superblocks of filesystems, RAID members, crypto
 * containers and partition tables, read from the device itself (no cache).
 */
interface SignatureProbe {

    /**
     * A filesystem type, else a partition table type, else "unknown" for a signature without a
     * type name; empty when there is no signature at all. Fails, rather than guess, when the
     * device cannot be read or holds several signatures none of which is sure.
     */
    Optional<String> probe(Path device) throws DeviceException;
}
