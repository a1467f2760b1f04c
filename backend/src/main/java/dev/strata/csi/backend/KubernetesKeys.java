package dev.strata.csi.backend;

import dev.strata.csi.log.Secrets;
import dev.strata.csi.rpc.CsiException;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The keys Kubernetes itself puts into the maps an administrator's StorageClass or
 * VolumeSnapshotClass becomes, as the sidecars and kubelet of deploy/ send them: every other key
 * in those maps is an administrator's, and each backend says which of those it takes
 * ({@link ParameterKeys}). Read from external-provisioner v6.3.0 ({@code controller.go}:
 * {@code removePrefixedParameters}, the fstype loop, {@code --extra-create-metadata}, the
 * provisioner identity), csi-snapshotter v8.6.0 ({@code RemovePrefixedParameters},
 * {@code --extra-create-metadata}) and kubelet's CSI volume plugin ({@code csi_mounter.go}: pod
 * info, service account tokens).
 *
 * <p>Any key under {@link #PREFIX} counts as Kubernetes': the sidecars refuse a key there they do
 * not know, so an administrator's typo under it never reaches the driver, and kubelet adds its pod
 * information under it ("this list might grow, but the prefix will be used", CSIDriver's API).
 * Accepting the whole namespace keeps a newer sidecar or kubelet from breaking every volume.
 */
public final class KubernetesKeys {

    /** The namespace Kubernetes keeps for itself in these maps. */
    public static final String PREFIX = "csi.storage.k8s.io/";

    /** The filesystem key of a StorageClass; the provisioner takes it out and sets the capability's fs_type from it. */
    public static final String FS_TYPE = PREFIX + "fstype";
    /**
     * The deprecated filesystem key: the provisioner compares it case-insensitively, sets the
     * capability's fs_type from it as from {@link #FS_TYPE}, and passes it through in the parameters.
     */
    public static final String DEPRECATED_FS_TYPE = "fsType";

    /** What external-provisioner's --extra-create-metadata adds to CreateVolume's parameters. */
    public static final String PVC_NAME = PREFIX + "pvc/name";
    public static final String PVC_NAMESPACE = PREFIX + "pvc/namespace";
    public static final String PV_NAME = PREFIX + "pv/name";

    /** The maps derived from an administrator's object, each as one request carries it. */
    public enum Request {
        /** CreateVolumeRequest.parameters: a StorageClass's parameters, as external-provisioner passes them on. */
        CREATE_VOLUME("StorageClass parameter", Set.of(PVC_NAME, PVC_NAMESPACE, PV_NAME,
                // Deprecated secret references: honoured, and passed through, not taken out as the prefixed ones are.
                "csiProvisionerSecretName", "csiProvisionerSecretNamespace",
                "csiControllerPublishSecretName", "csiControllerPublishSecretNamespace",
                "csiNodeStageSecretName", "csiNodeStageSecretNamespace",
                "csiNodePublishSecretName", "csiNodePublishSecretNamespace")),
        /**
         * volume_context of NodeStageVolume, NodePublishVolume (and ControllerPublishVolume): a
         * PersistentVolume's volumeAttributes (what CreateVolume answered, or an administrator wrote),
         * with the provisioner's identity, and on NodePublishVolume kubelet's pod information.
         */
        VOLUME_CONTEXT("volume_context key", Set.of("storage.kubernetes.io/csiProvisionerIdentity",
                PREFIX + "pod.name", PREFIX + "pod.namespace", PREFIX + "pod.uid", PREFIX + "serviceAccount.name",
                PREFIX + "ephemeral", Secrets.SERVICE_ACCOUNT_TOKENS)),
        /** CreateSnapshotRequest.parameters: a VolumeSnapshotClass's parameters, as csi-snapshotter passes them on. */
        CREATE_SNAPSHOT("VolumeSnapshotClass parameter", Set.of(PREFIX + "volumesnapshot/name",
                PREFIX + "volumesnapshot/namespace", PREFIX + "volumesnapshotcontent/name")),
        /**
         * CreateVolumeRequest.mutable_parameters and ControllerModifyVolumeRequest.mutable_parameters:
         * a VolumeAttributesClass's parameters, as external-provisioner and external-resizer pass
         * them on, the latter with its --extra-modify-metadata keys.
         */
        MODIFY_VOLUME("VolumeAttributesClass parameter", Set.of(PVC_NAME, PVC_NAMESPACE, PV_NAME));

        private final String described;
        private final Set<String> sent;

        Request(String described, Set<String> sent) {
            this.described = described;
            this.sent = sent;
        }

        /** What a key of this map is called in a message: "StorageClass parameter", "volume_context key"... */
        public String described() {
            return described;
        }

        /** Whether the key is Kubernetes' own in this map, not an administrator's. */
        public boolean fromKubernetes(String key) {
            return key.startsWith(PREFIX) || sent.contains(key)
                    || (this == CREATE_VOLUME && isDeprecatedFsType(key));
        }
    }

    /** A filesystem key of a StorageClass as the request gives it, and its value. */
    public record FsTypeKey(String key, String value) {}

    private KubernetesKeys() {}

    /**
     * The filesystem the StorageClass parameters name ({@link #DEPRECATED_FS_TYPE} in any case, or
     * {@link #FS_TYPE} in a call that did not come through the provisioner); INVALID_ARGUMENT when
     * two of them name different filesystems.
     */
    public static Optional<FsTypeKey> fsType(Map<String, String> parameters) {
        Optional<FsTypeKey> found = Optional.empty();
        for (Map.Entry<String, String> parameter : parameters.entrySet()) {
            if (!isDeprecatedFsType(parameter.getKey()) && !parameter.getKey().equals(FS_TYPE)) {
                continue;
            }
            FsTypeKey key = new FsTypeKey(parameter.getKey(), parameter.getValue());
            if (found.isPresent() && !found.get().value().equals(key.value())) {
                throw CsiException.invalidArgument("StorageClass parameters " + CsiException.printable(found.get().key()) + " '"
                        + CsiException.printable(found.get().value()) + "' and " + CsiException.printable(key.key()) + " '"
                        + CsiException.printable(key.value()) + "' name different filesystems");
            }
            found = Optional.of(key);
        }
        return found;
    }

    private static boolean isDeprecatedFsType(String key) {
        return key.toLowerCase(Locale.ROOT).equals("fstype");
    }
}
