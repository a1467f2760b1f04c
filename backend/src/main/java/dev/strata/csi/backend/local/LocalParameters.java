package dev.strata.csi.backend.local;

import dev.strata.csi.backend.KubernetesKeys.Request;
import dev.strata.csi.backend.ParameterKeys;
import java.util.Set;

/**
 * The keys of the maps a local volume's requests carry (docs/parameters.md): the StorageClass's
 * {@code allocation}; in the volume_context the allocation CreateVolume answered (a local volume
 * is never written by hand: its id names its node); no VolumeSnapshotClass parameter; the IO
 * limits of a VolumeAttributesClass; {@code encryption} of the StorageClass, with the key in the
 * node-stage secret. The filesystem is the capability's fs_type, which the
 * provisioner sets from the StorageClass.
 */
public final class LocalParameters {

    /** {@code sparse} (the default: blocks allocated on first write, capacity still reserved) or {@code full}. */
    public static final String ALLOCATION = "allocation";

    /** {@code luks2}: encrypted at rest (docs/attributes.md); {@code none} (the default): plain. */
    public static final String ENCRYPTION = "encryption";

    /**
     * The key in the node-stage (and node-expand) Secret that holds an encrypted volume's
     * passphrase: a Secret's key, not a StorageClass parameter.
     */
    public static final String PASSPHRASE_SECRET_KEY = "passphrase";

    /** IO limits, a VolumeAttributesClass's (docs/attributes.md): operations or bytes per second, or {@code max}. */
    public static final String READ_IOPS = "readIOPS";
    public static final String WRITE_IOPS = "writeIOPS";
    public static final String READ_BYTES_PER_SECOND = "readBytesPerSecond";
    public static final String WRITE_BYTES_PER_SECOND = "writeBytesPerSecond";

    public static final ParameterKeys STORAGE_CLASS = new ParameterKeys(Request.CREATE_VOLUME, "a local volume",
            Set.of(ALLOCATION, ENCRYPTION), Set.of());
    public static final ParameterKeys VOLUME_CONTEXT = new ParameterKeys(Request.VOLUME_CONTEXT, "a local volume",
            Set.of(), Set.of(ALLOCATION));
    public static final ParameterKeys SNAPSHOT_CLASS = new ParameterKeys(Request.CREATE_SNAPSHOT, "a local snapshot",
            Set.of(), Set.of());
    public static final ParameterKeys ATTRIBUTES_CLASS = new ParameterKeys(Request.MODIFY_VOLUME, "a local volume",
            Set.of(READ_IOPS, WRITE_IOPS, READ_BYTES_PER_SECOND, WRITE_BYTES_PER_SECOND), Set.of());

    private LocalParameters() {}
}
