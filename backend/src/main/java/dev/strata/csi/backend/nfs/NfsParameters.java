package dev.strata.csi.backend.nfs;

import dev.strata.csi.backend.KubernetesKeys.Request;
import dev.strata.csi.backend.ParameterKeys;
import java.util.Set;

/**
 * The keys of the maps an NFS volume's requests carry (docs/parameters.md): the StorageClass's
 * export, directory, delete policy and mode; in the volume_context what CreateVolume answered, or
 * what an administrator wrote into a static PersistentVolume's volumeAttributes; no
 * VolumeSnapshotClass parameter. A filesystem key is Kubernetes' and means nothing here: what is
 * mounted is the share.
 */
public final class NfsParameters {

    /** Whether the volume's capacity is enforced by a project quota: CreateVolume's answer, in the volume_context. */
    public static final String CAPACITY_ENFORCED = "capacityEnforced";

    public static final ParameterKeys STORAGE_CLASS = new ParameterKeys(Request.CREATE_VOLUME, "an NFS volume",
            Set.of(NfsVolume.SERVER, NfsVolume.SHARE, NfsVolume.SUB_DIR, OnDelete.PARAMETER, FileMode.PARAMETER), Set.of());
    public static final ParameterKeys VOLUME_CONTEXT = new ParameterKeys(Request.VOLUME_CONTEXT, "an NFS volume",
            Set.of(NfsVolume.SERVER, NfsVolume.SHARE, NfsVolume.SUB_DIR, FileMode.PARAMETER), Set.of(CAPACITY_ENFORCED));
    public static final ParameterKeys SNAPSHOT_CLASS = new ParameterKeys(Request.CREATE_SNAPSHOT, "an NFS snapshot",
            Set.of(), Set.of());

    private NfsParameters() {}
}
