package dev.strata.csi.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.backend.KubernetesKeys.FsTypeKey;
import dev.strata.csi.backend.KubernetesKeys.Request;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.backend.nfs.NfsParameters;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

/** Which keys each map takes, and what a refusal says; the sidecars' own maps are in node-server's e2e SidecarMaps. */
class ParameterKeysTest {

    @ParameterizedTest
    @ValueSource(strings = {"fsType", "fstype", "FSType", "FSTYPE", "csi.storage.k8s.io/pvc/name",
            "csi.storage.k8s.io/pvc/namespace", "csi.storage.k8s.io/pv/name", "csiProvisionerSecretName",
            "csiNodePublishSecretNamespace", "csi.storage.k8s.io/fstype"})
    void theKeysTheProvisionerSendsAreAcceptedByBothBackends(String key) {
        assertEquals(Optional.empty(), LocalParameters.STORAGE_CLASS.problem(Map.of(key, "v", "allocation", "full")));
        assertEquals(Optional.empty(), NfsParameters.STORAGE_CLASS.problem(Map.of(key, "v", "server", "s", "share", "/x")));
    }

    @Test
    void theDeprecatedFilesystemKeyIsOnlyKubernetesOwnInStorageClassParameters() {
        assertTrue(Request.CREATE_VOLUME.fromKubernetes("fsType"));
        assertFalse(Request.VOLUME_CONTEXT.fromKubernetes("fsType"), "the provisioner does not put it into volumeAttributes");
        assertFalse(Request.CREATE_SNAPSHOT.fromKubernetes("fsType"));
        assertFalse(Request.CREATE_VOLUME.fromKubernetes("fs_type"));
        assertFalse(Request.CREATE_VOLUME.fromKubernetes("csiProvisionerSecretname"), "the deprecated secret keys are exact");
    }

    @ParameterizedTest
    @ValueSource(strings = {"storage.kubernetes.io/csiProvisionerIdentity", "csi.storage.k8s.io/pod.name",
            "csi.storage.k8s.io/pod.namespace", "csi.storage.k8s.io/pod.uid", "csi.storage.k8s.io/serviceAccount.name",
            "csi.storage.k8s.io/serviceAccount.tokens", "csi.storage.k8s.io/ephemeral"})
    void theKeysTheProvisionerAndKubeletAddToAVolumeContextAreAccepted(String key) {
        assertEquals(Optional.empty(), LocalParameters.VOLUME_CONTEXT.problem(Map.of(key, "v", "allocation", "sparse")));
        assertEquals(Optional.empty(), NfsParameters.VOLUME_CONTEXT.problem(Map.of(key, "v", "server", "s", "share", "/x",
                "subDir", "d", "capacityEnforced", "false", "mountPermissions", "0775")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"csi.storage.k8s.io/volumesnapshot/name", "csi.storage.k8s.io/volumesnapshot/namespace",
            "csi.storage.k8s.io/volumesnapshotcontent/name"})
    void theKeysTheSnapshotterAddsAreAccepted(String key) {
        assertEquals(Optional.empty(), LocalParameters.SNAPSHOT_CLASS.problem(Map.of(key, "v")));
        assertEquals(Optional.empty(), NfsParameters.SNAPSHOT_CLASS.problem(Map.of(key, "v")));
    }

    @Test
    void aMisspeltKeyIsRefusedWithTheKnownKeysAndTheOneItResembles() {
        CsiException e = assertThrows(CsiException.class, () -> LocalParameters.STORAGE_CLASS.require(Map.of("allocaton", "full")));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
        assertEquals("unknown StorageClass parameter 'allocaton' for a local volume (did you mean allocation?); an administrator "
                + "may set: allocation, encryption, lvType, pool, thinOvercommitRatio; keys under csi.storage.k8s.io/ are Kubernetes' own", e.getMessage());
        String nfs = NfsParameters.STORAGE_CLASS.problem(Map.of("server", "s", "share", "/x", "ondelete", "retain")).orElseThrow();
        assertTrue(nfs.contains("(did you mean onDelete?)"), nfs);
        assertTrue(nfs.contains("mountPermissions, onDelete, server, share, subDir"), nfs);
    }

    @ParameterizedTest
    @CsvSource({"allocation,Allocation", "allocation,alloction", "allocation,allcoation", "subDir,subdir", "subDir,sub_dir",
            "csi.storage.k8s.io/fstype,fs-type", "csi.storage.k8s.io/fstype,fs_typ", "server,sever", "share,shar"})
    void misspellingsAreNamed(String known, String typed) {
        ParameterKeys keys = Set.of("allocation").contains(known) || known.endsWith("fstype")
                ? LocalParameters.STORAGE_CLASS : NfsParameters.STORAGE_CLASS;
        assertEquals(Optional.of(known), keys.misspelt(typed));
    }

    @ParameterizedTest
    @ValueSource(strings = {"size", "disk", "x", "sh", "replicas", "allocationPolicyForTheWholeCluster"})
    void keysUnlikeAnyKnownOneAreNotCalledMisspellings(String typed) {
        assertEquals(Optional.empty(), LocalParameters.STORAGE_CLASS.misspelt(typed));
        assertEquals(Optional.empty(), NfsParameters.STORAGE_CLASS.misspelt(typed));
    }

    @Test
    void snapshotAndContextRefusalsSayWhatMayBeSet() {
        String snapshot = NfsParameters.SNAPSHOT_CLASS.problem(Map.of("csi.storage.k8s.io/volumesnapshot/name", "s", "type", "full"))
                .orElseThrow();
        assertEquals("unknown VolumeSnapshotClass parameter 'type' for an NFS snapshot; an administrator may set none; "
                + "keys under csi.storage.k8s.io/ are Kubernetes' own", snapshot);
        String context = NfsParameters.VOLUME_CONTEXT.problem(Map.of("server", "s", "share", "/x", "subdir", "d")).orElseThrow();
        assertTrue(context.startsWith("unknown volume_context key 'subdir' for an NFS volume (did you mean subDir?)"), context);
        assertTrue(context.contains("may set: mountPermissions, server, share, subDir;"), "the driver's own keys are not offered: " + context);
        assertTrue(LocalParameters.VOLUME_CONTEXT.problem(Map.of("allocation", "full", "tier", "fast")).isPresent());
    }

    @Test
    void aRefusalNeverQuotesAValue() {
        String problem = LocalParameters.VOLUME_CONTEXT.problem(Map.of("token", "secret-value-1234")).orElseThrow();
        assertFalse(problem.contains("secret-value-1234"), problem);
        String controls = LocalParameters.STORAGE_CLASS.problem(Map.of("bad\nkey", "v")).orElseThrow();
        assertTrue(controls.contains("'bad\\x0akey'"), controls);
    }

    @Test
    void theFilesystemKeyIsReadInAnyCase() {
        assertEquals(Optional.of(new FsTypeKey("FSType", "xfs")), KubernetesKeys.fsType(Map.of("FSType", "xfs", "allocation", "full")));
        assertEquals(Optional.of(new FsTypeKey("csi.storage.k8s.io/fstype", "ext4")),
                KubernetesKeys.fsType(Map.of("csi.storage.k8s.io/fstype", "ext4")));
        assertEquals(Optional.empty(), KubernetesKeys.fsType(Map.of("allocation", "full")));
        assertEquals("xfs", KubernetesKeys.fsType(Map.of("fsType", "xfs", "fstype", "xfs")).orElseThrow().value(), "agreeing keys");
        CsiException e = assertThrows(CsiException.class, () -> KubernetesKeys.fsType(Map.of("fsType", "xfs", "csi.storage.k8s.io/fstype", "ext4")));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().contains("'xfs'") && e.getMessage().contains("'ext4'"), e.getMessage());
    }

    @Test
    void distanceCountsEdits() {
        assertEquals(0, ParameterKeys.distance("share", "share"));
        assertEquals(1, ParameterKeys.distance("shar", "share"));
        assertEquals(2, ParameterKeys.distance("allcoation", "allocation"));
        assertEquals(6, ParameterKeys.distance("", "server"));
    }
}
