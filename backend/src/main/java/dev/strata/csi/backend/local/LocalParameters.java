package dev.strata.csi.backend.local;

import dev.strata.csi.backend.KubernetesKeys.Request;
import dev.strata.csi.backend.ParameterKeys;
import java.util.Set;

/**
 * The keys of the maps a local volume's requests carry (docs/parameters.md): the StorageClass's
 * {@code allocation}; in the volume_context the allocation CreateVolume answered (a local volume
 * is never written by hand: its id names its node); no VolumeSnapshotClass parameter. The
 * filesystem is the capability's fs_type, which the provisioner sets from the StorageClass.
 */
public final class LocalParameters {

    /** {@code sparse} (the default: blocks allocated on first write, capacity still reserved) or {@code full}. */
    public static final String ALLOCATION = "allocation";

    public static final ParameterKeys STORAGE_CLASS = new ParameterKeys(Request.CREATE_VOLUME, "a local volume",
            Set.of(ALLOCATION), Set.of());
    public static final ParameterKeys VOLUME_CONTEXT = new ParameterKeys(Request.VOLUME_CONTEXT, "a local volume",
            Set.of(), Set.of(ALLOCATION));
    public static final ParameterKeys SNAPSHOT_CLASS = new ParameterKeys(Request.CREATE_SNAPSHOT, "a local snapshot",
            Set.of(), Set.of());

    private LocalParameters() {}
}
