package dev.strata.csi.backend.local;

import dev.strata.csi.backend.KubernetesKeys.Request;
import dev.strata.csi.backend.ParameterKeys;
import dev.strata.csi.rpc.CsiException;
import java.util.Map;
import java.util.Set;

/**
 * The keys of the maps a local volume's requests carry (docs/parameters.md): the StorageClass's
 * {@code allocation}, {@code pool}, {@code lvType} and {@code thinOvercommitRatio}; in the
 * volume_context the allocation CreateVolume answered, and for an LVM volume its pool and lvType (a local volume
 * is never written by hand: its id names its node); no VolumeSnapshotClass parameter; the IO
 * limits of a VolumeAttributesClass; {@code encryption} of the StorageClass, with the key in the
 * node-stage secret. The filesystem is the capability's fs_type, which the
 * provisioner sets from the StorageClass.
 */
public final class LocalParameters {

    /** Image pool: {@code sparse} (the default: blocks allocated on first write, capacity still reserved) or {@code full}. */
    public static final String ALLOCATION = "allocation";
    /** {@code image} (the default: an image file on a loop device) or {@code lvm} (a logical volume of the node's volume group). */
    public static final String POOL = "pool";
    /** LVM pool: {@code thin} (the default: a thin volume in the thin pool, with thin snapshots) or {@code linear}. */
    public static final String LV_TYPE = "lvType";
    /**
     * LVM thin volumes: how many times the thin pool's size the sizes of its thin volumes and
     * snapshots may add up to; {@code "1"} (the default) never overcommits: every volume can be filled.
     */
    public static final String THIN_OVERCOMMIT_RATIO = "thinOvercommitRatio";

    /** {@code luks2}: encrypted at rest (docs/attributes.md); {@code none} (the default): plain. */
    public static final String ENCRYPTION = "encryption";

    /**
     * The key in the node-stage (and node-expand) Secret that holds an encrypted volume's
     * passphrase: a Secret's key, not a StorageClass parameter.
     */
    public static final String PASSPHRASE_SECRET_KEY = "passphrase";

    /**
     * The key of the same Secret that holds the passphrase being rotated away from: the node adds
     * {@link #PASSPHRASE_SECRET_KEY}'s to the volume's header with it, then removes it (docs/attributes.md).
     */
    public static final String PREVIOUS_PASSPHRASE_SECRET_KEY = "previousPassphrase";

    /**
     * VolumeSnapshotClass: on how many nodes each snapshot is kept, its own counted ({@code "1"},
     * the default: its volume's node only); the others keep copies (docs/snapshot-copies.md).
     */
    public static final String COPIES = "copies";

    /** IO limits, a VolumeAttributesClass's (docs/attributes.md): operations or bytes per second, or {@code max}. */
    public static final String READ_IOPS = "readIOPS";
    public static final String WRITE_IOPS = "writeIOPS";
    public static final String READ_BYTES_PER_SECOND = "readBytesPerSecond";
    public static final String WRITE_BYTES_PER_SECOND = "writeBytesPerSecond";

    public static final ParameterKeys STORAGE_CLASS = new ParameterKeys(Request.CREATE_VOLUME, "a local volume",
            Set.of(ALLOCATION, POOL, LV_TYPE, THIN_OVERCOMMIT_RATIO, ENCRYPTION), Set.of());
    public static final ParameterKeys VOLUME_CONTEXT = new ParameterKeys(Request.VOLUME_CONTEXT, "a local volume",
            Set.of(), Set.of(ALLOCATION, POOL, LV_TYPE));
    public static final ParameterKeys SNAPSHOT_CLASS = new ParameterKeys(Request.CREATE_SNAPSHOT, "a local snapshot",
            Set.of(COPIES), Set.of());
    public static final ParameterKeys ATTRIBUTES_CLASS = new ParameterKeys(Request.MODIFY_VOLUME, "a local volume",
            Set.of(READ_IOPS, WRITE_IOPS, READ_BYTES_PER_SECOND, WRITE_BYTES_PER_SECOND), Set.of());

    /**
     * The class's {@link #COPIES}: 1 when not given; INVALID_ARGUMENT for anything but a whole
     * number. How many are allowed is the caller's to say.
     */
    public static int copies(Map<String, String> parameters) {
        String value = parameters.getOrDefault(COPIES, "1");
        try {
            return Integer.parseInt(value.strip());
        } catch (NumberFormatException e) {
            throw CsiException.invalidArgument("parameter " + COPIES + " '" + CsiException.printable(value)
                    + "' is not a whole number: give how many nodes are to keep each snapshot, 1 or more");
        }
    }

    private LocalParameters() {}
}
