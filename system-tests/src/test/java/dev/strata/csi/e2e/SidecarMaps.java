package dev.strata.csi.e2e;

import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * What the sidecars and kubelet of deploy/ put into the maps of each request, as a table: the
 * StorageClasses and VolumeSnapshotClasses users write, and the maps each becomes on its way to
 * the driver. The transformations are a stand-in for external-provisioner v6.3.0 (run with
 * --extra-create-metadata, deploy/controller.yaml), csi-snapshotter v8.6.0 (run without it there;
 * both ways here) and kubelet's CSI volume plugin with the CSIDriver of deploy/csidriver.yaml
 * (podInfoOnMount: true, no tokenRequests), written from their sources:
 * <ul>
 *   <li>provisioner, {@code prepareProvision}: the filesystem is {@code fsType} in any case or
 *   {@code csi.storage.k8s.io/fstype}, both at once an error; {@code removePrefixedParameters}
 *   takes out the prefixed keys it knows (fstype, the secret references) and fails on any other
 *   prefixed key; everything else, the deprecated {@code fsType} and {@code csi*Secret*} keys
 *   included, passes through; then the pvc/pv metadata is added. The capability: block for a
 *   block claim, else mount with that fs_type and the class's mountOptions; ReadWriteOnce is
 *   SINGLE_NODE_MULTI_WRITER, as this driver advertises that capability.</li>
 *   <li>provisioner, the PV: volumeAttributes are its identity plus CreateVolume's volume_context.</li>
 *   <li>kubelet: NodeStageVolume gets the volumeAttributes; NodePublishVolume gets them plus the
 *   pod's name, namespace, uid, service account and {@code ephemeral=false}.</li>
 *   <li>snapshotter, {@code RemovePrefixedParameters}: the snapshotter secret keys are taken out, any
 *   other prefixed key is an error, with --extra-create-metadata the snapshot's names are added.</li>
 * </ul>
 * Where this differs from the real ones: the sidecars' errors (which never reach a driver) are an
 * IllegalArgumentException here, and the secrets a secret reference names are not fetched or sent
 * (the requests' secrets fields stay empty): only the maps are modelled.
 */
final class SidecarMaps {

    static final String PREFIX = "csi.storage.k8s.io/";
    /** The form of the provisioner's identity: start time in ms, a random number, the driver's name. */
    static final String PROVISIONER_IDENTITY = "1795750000000-4242-strata.csi.dev";
    static final String NAMESPACE = "team-a";

    private static final Set<String> PROVISIONER_STRIPS = Set.of(PREFIX + "fstype",
            PREFIX + "secret-name", PREFIX + "secret-namespace",
            PREFIX + "provisioner-secret-name", PREFIX + "provisioner-secret-namespace",
            PREFIX + "controller-publish-secret-name", PREFIX + "controller-publish-secret-namespace",
            PREFIX + "node-stage-secret-name", PREFIX + "node-stage-secret-namespace",
            PREFIX + "node-publish-secret-name", PREFIX + "node-publish-secret-namespace",
            PREFIX + "controller-expand-secret-name", PREFIX + "controller-expand-secret-namespace",
            PREFIX + "node-expand-secret-name", PREFIX + "node-expand-secret-namespace",
            PREFIX + "controller-modify-secret-name", PREFIX + "controller-modify-secret-namespace");

    private static final Set<String> SNAPSHOTTER_STRIPS = Set.of(
            PREFIX + "snapshotter-secret-name", PREFIX + "snapshotter-secret-namespace",
            PREFIX + "snapshotter-list-secret-name", PREFIX + "snapshotter-list-secret-namespace",
            PREFIX + "group-snapshotter-get-secret-name", PREFIX + "group-snapshotter-get-secret-namespace",
            PREFIX + "group-snapshotter-secret-name", PREFIX + "group-snapshotter-secret-namespace");

    enum Backend { LOCAL, NFS }

    /**
     * A StorageClass as users write it, and what it must lead to: the filesystem staged (local),
     * or the INVALID_ARGUMENT whose message contains {@code refusal}.
     */
    record StorageClass(String name, Backend backend, Map<String, String> parameters, List<String> mountOptions, boolean block,
            Optional<String> staged, Optional<String> refusal) {

        static StorageClass staged(String name, Backend backend, Map<String, String> parameters, String fsType) {
            return new StorageClass(name, backend, parameters, List.of(), false, Optional.of(fsType), Optional.empty());
        }

        static StorageClass refused(String name, Backend backend, Map<String, String> parameters, String refusal) {
            return new StorageClass(name, backend, parameters, List.of(), false, Optional.empty(), Optional.of(refusal));
        }

        @Override
        public String toString() {
            return name;
        }
    }

    static final Map<String, String> NFS_EXPORT = Map.of("server", NfsTest.SERVER, "share", NfsTest.SHARE);

    static final List<StorageClass> STORAGE_CLASSES = List.of(
            StorageClass.staged("deploy/storageclasses.yaml strata-local-ext4", Backend.LOCAL,
                    Map.of(PREFIX + "fstype", "ext4", "allocation", "sparse"), "ext4"),
            StorageClass.staged("fsType: xfs", Backend.LOCAL, Map.of("fsType", "xfs"), "xfs"),
            StorageClass.staged("fstype: ext4", Backend.LOCAL, Map.of("fstype", "ext4", "allocation", "full"), "ext4"),
            StorageClass.staged("FSType: btrfs with secret references, prefixed and deprecated", Backend.LOCAL,
                    Map.of("FSType", "btrfs", PREFIX + "provisioner-secret-name", "strata", PREFIX + "provisioner-secret-namespace",
                            "kube-system", "csiNodeStageSecretName", "strata", "csiNodeStageSecretNamespace", "kube-system"),
                    "btrfs"),
            new StorageClass("fsType: xfs, a block claim", Backend.LOCAL, Map.of("fsType", "xfs"), List.of(), true,
                    Optional.empty(), Optional.empty()),
            StorageClass.refused("fsType: xfs, allocaton: full", Backend.LOCAL, Map.of("fsType", "xfs", "allocaton", "full"),
                    "unknown StorageClass parameter 'allocaton' for a local volume (did you mean allocation?); "
                            + "an administrator may set: allocation"),
            new StorageClass("deploy/examples/nfs.yaml strata-nfs", Backend.NFS, withExport(Map.of(
                    "subDir", "${pvc.metadata.namespace}/${pvc.metadata.name}", "onDelete", "delete", "mountPermissions", "0777")),
                    List.of("nfsvers=4.1"), false, Optional.of("nfs"), Optional.empty()),
            StorageClass.staged("NFS, fsType: nfs", Backend.NFS, withExport(Map.of("fsType", "nfs")), "nfs"),
            StorageClass.staged("NFS, FSType: nfs4 with secret references", Backend.NFS, withExport(Map.of("FSType", "nfs4",
                    "csiProvisionerSecretName", "nfs", "csiProvisionerSecretNamespace", "kube-system",
                    PREFIX + "node-publish-secret-name", "nfs", PREFIX + "node-publish-secret-namespace", "kube-system")), "nfs"),
            // The provisioner makes the capability's fs_type xfs: a capability no NFS volume can have.
            StorageClass.refused("NFS, fstype: xfs", Backend.NFS, withExport(Map.of("fstype", "xfs")), "does not fit an NFS volume"),
            StorageClass.refused("NFS, ondelete: retain", Backend.NFS, withExport(Map.of("ondelete", "retain")),
                    "unknown StorageClass parameter 'ondelete' for an NFS volume (did you mean onDelete?); "
                            + "an administrator may set: mountPermissions, onDelete, server, share, subDir"));

    /** A VolumeSnapshotClass, whether csi-snapshotter runs with --extra-create-metadata, and the refusal expected, if any. */
    record SnapshotClass(String name, Map<String, String> parameters, boolean extraCreateMetadata, Optional<String> refusal) {

        @Override
        public String toString() {
            return name;
        }
    }

    static final List<SnapshotClass> SNAPSHOT_CLASSES = List.of(
            new SnapshotClass("deploy's classes: no parameters", Map.of(), false, Optional.empty()),
            new SnapshotClass("no parameters, --extra-create-metadata", Map.of(), true, Optional.empty()),
            new SnapshotClass("a secret reference, --extra-create-metadata", Map.of(PREFIX + "snapshotter-secret-name", "s",
                    PREFIX + "snapshotter-secret-namespace", "ns"), true, Optional.empty()),
            new SnapshotClass("a parameter of another driver", Map.of("type", "incremental"), true,
                    Optional.of("unknown VolumeSnapshotClass parameter 'type'")));

    private SidecarMaps() {}

    private static Map<String, String> withExport(Map<String, String> parameters) {
        Map<String, String> all = new HashMap<>(NFS_EXPORT);
        all.putAll(parameters);
        return Map.copyOf(all);
    }

    /** CreateVolume's parameters and capability, as the provisioner makes them for a claim of the class. */
    record Provisioned(Map<String, String> parameters, VolumeCapability capability) {}

    static Provisioned provision(StorageClass storageClass, String claim, String pvName, VolumeCapability.AccessMode.Mode mode) {
        String fsType = "";
        int found = 0;
        for (Map.Entry<String, String> parameter : storageClass.parameters().entrySet()) {
            if (parameter.getKey().toLowerCase(Locale.ROOT).equals("fstype") || parameter.getKey().equals(PREFIX + "fstype")) {
                fsType = parameter.getValue();
                found++;
            }
        }
        if (found > 1) {
            throw new IllegalArgumentException("fstype specified in parameters with both \"fstype\" and \"" + PREFIX + "fstype\" keys");
        }
        Map<String, String> parameters = removePrefixed(storageClass.parameters(), PROVISIONER_STRIPS);
        parameters.put(PREFIX + "pvc/name", claim);
        parameters.put(PREFIX + "pvc/namespace", NAMESPACE);
        parameters.put(PREFIX + "pv/name", pvName);
        VolumeCapability.Builder capability = VolumeCapability.newBuilder()
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(mode));
        if (storageClass.block()) {
            capability.setBlock(VolumeCapability.BlockVolume.getDefaultInstance());
        } else {
            capability.setMount(VolumeCapability.MountVolume.newBuilder().setFsType(fsType).addAllMountFlags(storageClass.mountOptions()));
        }
        return new Provisioned(Map.copyOf(parameters), capability.build());
    }

    /** The PV's volumeAttributes: NodeStageVolume's and ControllerPublishVolume's volume_context. */
    static Map<String, String> volumeAttributes(Volume volume) {
        Map<String, String> attributes = new HashMap<>(Map.of("storage.kubernetes.io/csiProvisionerIdentity", PROVISIONER_IDENTITY));
        attributes.putAll(volume.getVolumeContextMap());
        return Map.copyOf(attributes);
    }

    /** NodePublishVolume's volume_context: the volumeAttributes and the pod's information. */
    static Map<String, String> publishContext(Map<String, String> volumeAttributes, String pod, String podUid) {
        Map<String, String> context = new HashMap<>(volumeAttributes);
        context.put(PREFIX + "pod.name", pod);
        context.put(PREFIX + "pod.namespace", NAMESPACE);
        context.put(PREFIX + "pod.uid", podUid);
        context.put(PREFIX + "serviceAccount.name", "default");
        context.put(PREFIX + "ephemeral", "false");
        return Map.copyOf(context);
    }

    /** CreateSnapshot's parameters, as csi-snapshotter makes them for a VolumeSnapshot of the class. */
    static Map<String, String> snapshotParameters(SnapshotClass snapshotClass, String snapshot, String content) {
        Map<String, String> parameters = removePrefixed(snapshotClass.parameters(), SNAPSHOTTER_STRIPS);
        if (snapshotClass.extraCreateMetadata()) {
            parameters.put(PREFIX + "volumesnapshot/name", snapshot);
            parameters.put(PREFIX + "volumesnapshot/namespace", NAMESPACE);
            parameters.put(PREFIX + "volumesnapshotcontent/name", content);
        }
        return Map.copyOf(parameters);
    }

    /** Both sidecars' removePrefixedParameters: the prefixed keys they know taken out, any other prefixed key an error. */
    private static Map<String, String> removePrefixed(Map<String, String> parameters, Set<String> known) {
        Map<String, String> kept = new HashMap<>();
        for (Map.Entry<String, String> parameter : parameters.entrySet()) {
            if (!parameter.getKey().startsWith(PREFIX)) {
                kept.put(parameter.getKey(), parameter.getValue());
            } else if (!known.contains(parameter.getKey())) {
                throw new IllegalArgumentException("found unknown parameter key \"" + parameter.getKey() + "\" with reserved namespace " + PREFIX);
            }
        }
        return kept;
    }
}
