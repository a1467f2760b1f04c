package dev.strata.csi.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The manifests of deploy/ as a whole. Each check must find nothing in the real manifests, and
 * must find the fault in a copy broken the way a careless edit would break it.
 */
@Tag("root")
class ManifestsTest {

    static Manifests manifests() throws IOException {
        return Manifests.load(Manifests.defaultDir());
    }

    static ManifestChecks checks() throws IOException {
        return new ManifestChecks(manifests());
    }

    /** The checks of a freshly parsed copy after {@code edit}. */
    static ManifestChecks broken(Consumer<Manifests> edit) throws IOException {
        Manifests copy = manifests();
        edit.accept(copy);
        return new ManifestChecks(copy);
    }

    @SuppressWarnings("unchecked")
    static List<Object> args(Manifests manifests, String kind, String name, String container) {
        Map<String, Object> body = manifests.pod(kind, name).containers().stream()
                .filter(c -> c.name().equals(container)).findFirst().orElseThrow().body();
        return (List<Object>) body.get("args");
    }

    static void replaceArg(Manifests manifests, String kind, String name, String container, String prefix, String replacement) {
        List<Object> args = args(manifests, kind, name, container);
        int index = -1;
        for (int i = 0; i < args.size(); i++) {
            if (String.valueOf(args.get(i)).startsWith(prefix)) {
                index = i;
            }
        }
        assertTrue(index >= 0, container + " has no argument starting " + prefix);
        args.set(index, replacement);
    }

    @Test
    void everyFileParsesAndTheKustomizationInstallsEveryFile() throws Exception {
        Manifests manifests = manifests();
        assertEquals(List.of(), new ManifestChecks(manifests).structure());
        // What the install consists of, so that a file dropped from the kustomization shows.
        List<String> kinds = manifests.installed().stream().map(KubeObject::kind).distinct().sorted().toList();
        assertEquals(List.of("CSIDriver", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "Deployment", "Namespace",
                "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount", "StorageClass"), kinds);
    }

    @Test
    void aFileThatIsNotYamlIsReportedWithItsName(@TempDir Path dir) throws Exception {
        Path file = Files.writeString(dir.resolve("bad.yaml"), "kind: Pod\nmetadata:\n  name: [unclosed\n");
        IOException error = assertThrows(IOException.class, () -> Manifests.parse(file));
        assertTrue(error.getMessage().contains("bad.yaml"), error.getMessage());
    }

    @Test
    void namespaces() throws Exception {
        assertEquals(List.of(), checks().namespaces());
        List<String> problems = broken(m -> Tree.map(m.one("Role", "strata-external-attacher").body(), "metadata")
                .put("namespace", "default")).namespaces();
        assertEquals(1, problems.size(), problems.toString());
    }

    @Test
    void driverNameAgreesEverywhere() throws Exception {
        ManifestChecks checks = checks();
        assertEquals("strata.csi.dev", checks.driverName());
        assertEquals(List.of(), checks.driverNameAgrees());
        assertFalse(broken(m -> m.one("StorageClass", "strata-local-xfs").body().put("provisioner", "strata.example.com"))
                .driverNameAgrees().isEmpty());
        assertFalse(broken(m -> m.one("VolumeAttributesClass", "strata-io-fast").body().put("driverName", "strata.example.com"))
                .driverNameAgrees().isEmpty());
        assertFalse(broken(m -> replaceArg(m, "Deployment", "strata-controller", "controller-server", "--driver-name",
                "--driver-name=strata.example.com")).driverNameAgrees().isEmpty());
        assertFalse(broken(m -> replaceArg(m, "DaemonSet", "strata-node", "node-driver-registrar", "--kubelet-registration-path",
                "--kubelet-registration-path=/var/lib/kubelet/plugins/other.csi.dev/csi.sock")).driverNameAgrees().isEmpty());
    }

    @Test
    void everySidecarDialsTheSocketItsServerListensOn() throws Exception {
        assertEquals(List.of(), checks().socketsAgree());
        assertFalse(broken(m -> replaceArg(m, "Deployment", "strata-controller", "csi-attacher", "--csi-address",
                "--csi-address=/csi/attacher.sock")).socketsAgree().isEmpty());
        assertFalse(broken(m -> replaceArg(m, "DaemonSet", "strata-node", "node-server", "--endpoint",
                "--endpoint=unix:///var/run/csi.sock")).socketsAgree().isEmpty());
        // The registrar's idea of the socket on the host must follow the plugin directory.
        assertFalse(broken(m -> m.pod("DaemonSet", "strata-node").volume("plugin-dir").ifPresent(volume ->
                Tree.map(volume, "hostPath").put("path", "/var/lib/kubelet/plugins/elsewhere")))
                .socketsAgree().isEmpty());
    }

    @Test
    void probesAndServicesPointAtPortsThatAreServed() throws Exception {
        assertEquals(List.of(), checks().portsAgree());
        assertFalse(broken(m -> replaceArg(m, "DaemonSet", "strata-node", "liveness-probe", "--http-endpoint",
                "--http-endpoint=:9808")).portsAgree().isEmpty());
        assertFalse(broken(m -> replaceArg(m, "Deployment", "strata-controller", "controller-server", "--agent-registry-address",
                "--agent-registry-address=0.0.0.0:9999")).portsAgree().isEmpty());
        assertFalse(broken(m -> replaceArg(m, "DaemonSet", "strata-node", "node-server", "--controller-address",
                "--controller-address=strata-controller-agents.kube-system.svc:9869")).portsAgree().isEmpty());
        // A Service with a cluster IP would hand each agent to one replica.
        List<String> clusterIp = broken(m -> Tree.map(m.one("Service", "strata-controller-agents").body(), "spec").remove("clusterIP"))
                .portsAgree();
        assertTrue(clusterIp.stream().anyMatch(problem -> problem.contains("is not headless")), clusterIp.toString());
        List<String> readyOnly = broken(m -> Tree.map(m.one("Service", "strata-controller-agents").body(), "spec")
                .put("publishNotReadyAddresses", false)).portsAgree();
        assertTrue(readyOnly.stream().anyMatch(problem -> problem.contains("lists only ready pods")), readyOnly.toString());
    }

    @Test
    void theControllerRunsAsReplicasThatFailOver() throws Exception {
        assertEquals(List.of(), checks().replicas());
        assertEquals(2, Tree.at(manifests().one("Deployment", "strata-controller").body(), "spec", "replicas"));
        assertEquals("None", Tree.string(manifests().one("Service", "strata-controller-agents").body(), "spec", "clusterIP"));
        assertFalse(broken(m -> Tree.map(m.one("Deployment", "strata-controller").body(), "spec").put("replicas", 1))
                .replicas().isEmpty());
        assertFalse(broken(m -> Tree.map(m.one("Deployment", "strata-controller").body(), "spec").remove("replicas"))
                .replicas().isEmpty());
        for (String sidecar : List.of("csi-provisioner", "csi-attacher", "csi-resizer", "csi-snapshotter")) {
            assertFalse(broken(m -> args(m, "Deployment", "strata-controller", sidecar).removeIf(arg -> arg.equals("--leader-election")))
                    .replicas().isEmpty(), sidecar);
            assertFalse(broken(m -> {
                List<Object> args = args(m, "Deployment", "strata-controller", sidecar);
                args.set(args.indexOf("--leader-election"), "--leader-election=false");
            }).replicas().isEmpty(), sidecar);
        }
        assertFalse(broken(m -> m.pod("Deployment", "strata-controller").spec().remove("affinity")).replicas().isEmpty());
        assertFalse(broken(m -> Tree.maps(m.pod("Deployment", "strata-controller").spec(), "affinity", "podAntiAffinity",
                "preferredDuringSchedulingIgnoredDuringExecution").forEach(term -> Tree.map(term, "podAffinityTerm")
                .put("topologyKey", "topology.kubernetes.io/zone"))).replicas().isEmpty());
        assertFalse(broken(m -> Tree.map(m.one("PodDisruptionBudget", "strata-controller").body(), "spec").put("minAvailable", 2))
                .replicas().isEmpty());
        assertFalse(broken(m -> m.all().remove(m.one("PodDisruptionBudget", "strata-controller"))).replicas().isEmpty());
        assertFalse(broken(m -> Tree.map(m.one("PodDisruptionBudget", "strata-controller").body(), "spec", "selector", "matchLabels")
                .put("app.kubernetes.io/name", "strata-node")).replicas().isEmpty());
    }

    @Test
    void sidecarsArePinnedReleasesGivenFlagsTheyKnow() throws Exception {
        ManifestChecks checks = checks();
        assertEquals(List.of(), checks.sidecarsKnown());
        assertEquals(List.of(), checks.imagesPinned());
        assertFalse(broken(m -> args(m, "Deployment", "strata-controller", "csi-provisioner").add("--enable-capacitty"))
                .sidecarsKnown().isEmpty());
        assertFalse(broken(m -> replaceArg(m, "Deployment", "strata-controller", "csi-provisioner", "--capacity-ownerref-level",
                "--capacity-ownerref-level=1")).sidecarsKnown().isEmpty());
        assertFalse(broken(m -> args(m, "Deployment", "strata-controller", "csi-attacher").removeIf(arg -> arg.equals("--leader-election")))
                .sidecarsKnown().isEmpty());
        assertFalse(broken(m -> m.pod("Deployment", "strata-controller").sidecars().getFirst().body()
                .put("image", "registry.k8s.io/sig-storage/csi-provisioner:latest")).imagesPinned().isEmpty());
        // The snapshotter: another release than the table describes, a flag of the provisioner, a
        // misspelled group snapshot gate, and no socket.
        List<String> otherRelease = broken(m -> container(m, "csi-snapshotter").put("image",
                "registry.k8s.io/sig-storage/csi-snapshotter:v8.5.0")).sidecarsKnown();
        assertTrue(otherRelease.stream().anyMatch(problem -> problem.contains("the table describes v8.6.0")), otherRelease.toString());
        assertFalse(broken(m -> args(m, "Deployment", "strata-controller", "csi-snapshotter")
                .add("--snapshot-orphan-sweep-interval=0")).sidecarsKnown().isEmpty());
        assertFalse(broken(m -> args(m, "Deployment", "strata-controller", "csi-snapshotter")
                .add("--feature-gate=CSIVolumeGroupSnapshot=true")).sidecarsKnown().isEmpty());
        List<String> noSocket = broken(m -> args(m, "Deployment", "strata-controller", "csi-snapshotter")
                .removeIf(arg -> String.valueOf(arg).startsWith("--csi-address"))).sidecarsKnown();
        assertTrue(noSocket.stream().anyMatch(problem -> problem.contains("csi-snapshotter: lacks --csi-address")), noSocket.toString());
    }

    /** The container of the controller pod named {@code name}. */
    static Map<String, Object> container(Manifests manifests, String name) {
        return manifests.pod("Deployment", "strata-controller").containers().stream()
                .filter(c -> c.name().equals(name)).findFirst().orElseThrow().body();
    }

    @Test
    void rbacGrantsEachSidecarWhatItNeedsAndNoMore() throws Exception {
        assertEquals(List.of(), checks().rbac());
        // A verb taken away from the attacher's role, and one more given to the provisioner.
        List<String> missing = broken(m -> {
            List<Map<String, Object>> rules = Tree.maps(m.one("ClusterRole", "strata-external-attacher").body(), "rules");
            Tree.list(rules.getLast(), "verbs").clear();
        }).rbac();
        assertTrue(missing.stream().anyMatch(problem -> problem.contains("lacks patch storage.k8s.io/volumeattachments/status")),
                missing.toString());
        List<String> excess = broken(m -> Tree.list(m.one("ClusterRole", "strata-external-provisioner").body(), "rules")
                .add(Map.of("apiGroups", List.of(""), "resources", List.of("secrets"), "verbs", List.of("get")))).rbac();
        assertTrue(excess.stream().anyMatch(problem -> problem.contains("get secrets")), excess.toString());
        // The snapshotter without the status of VolumeSnapshotContents, the provisioner without the
        // VolumeSnapshot it restores from, and the sidecars without their leases.
        List<String> status = broken(m -> Tree.list(m.one("ClusterRole", "strata-external-snapshotter").body(), "rules")
                .removeIf(rule -> Tree.strings(rule, "resources").contains("volumesnapshotcontents/status"))).rbac();
        assertTrue(status.contains("Deployment/strata-controller (controller.yaml) (ServiceAccount strata-controller): "
                + "lacks update snapshot.storage.k8s.io/volumesnapshotcontents/status (cluster)"), status.toString());
        List<String> restore = broken(m -> Tree.list(m.one("ClusterRole", "strata-external-provisioner").body(), "rules")
                .removeIf(rule -> Tree.strings(rule, "resources").contains("volumesnapshots"))).rbac();
        assertTrue(restore.stream().anyMatch(problem -> problem.contains("lacks get snapshot.storage.k8s.io/volumesnapshots")),
                restore.toString());
        List<String> allLeases = broken(m -> m.all().removeIf(object -> "RoleBinding".equals(object.kind()))).rbac();
        assertTrue(allLeases.stream().anyMatch(problem -> problem.contains("lacks create coordination.k8s.io/leases (own namespace)")),
                allLeases.toString());
        // The node pod needs nothing from the API, so it must not get a token.
        assertFalse(broken(m -> m.pod("DaemonSet", "strata-node").spec().remove("automountServiceAccountToken")).rbac().isEmpty());
    }

    @Test
    void everyFlagOfOurServersIsOneTheServerKnows() throws Exception {
        assertEquals(List.of(), checks().serverFlags());
        assertFalse(broken(m -> args(m, "DaemonSet", "strata-node", "node-server").add("--pool-directory=/x")).serverFlags().isEmpty());
        // A flag of the controller given to the node, and a flag given twice.
        assertFalse(broken(m -> args(m, "DaemonSet", "strata-node", "node-server").add("--agent-registry-address=0.0.0.0:1"))
                .serverFlags().isEmpty());
        assertFalse(broken(m -> args(m, "Deployment", "strata-controller", "controller-server").add("--driver-name=strata.csi.dev"))
                .serverFlags().isEmpty());
    }

    @Test
    void theNodePluginCanAttachAndMount() throws Exception {
        assertEquals(List.of(), checks().nodePlugin());
        assertFalse(broken(m -> Tree.maps(m.pod("DaemonSet", "strata-node").driver().body(), "env").stream()
                .filter(variable -> "NODE_ID".equals(variable.get("name")))
                .forEach(variable -> Tree.map(variable, "valueFrom", "fieldRef").put("fieldPath", "metadata.name")))
                .nodePlugin().isEmpty());
        assertFalse(broken(m -> Tree.maps(m.pod("DaemonSet", "strata-node").driver().body(), "volumeMounts").stream()
                .filter(mount -> "/var/lib/kubelet".equals(mount.get("mountPath")))
                .forEach(mount -> mount.put("mountPropagation", "HostToContainer")))
                .nodePlugin().isEmpty());
        // The container's own /sys/fs/cgroup: on cgroup v2 its namespace hides the pods' cgroups.
        assertFalse(broken(m -> replaceArg(m, "DaemonSet", "strata-node", "node-server", "--cgroup-root",
                "--cgroup-root=/sys/fs/cgroup")).nodePlugin().isEmpty());
        assertFalse(broken(m -> Tree.maps(m.pod("DaemonSet", "strata-node").driver().body(), "volumeMounts").stream()
                .filter(mount -> "/host/sys/fs/cgroup".equals(mount.get("mountPath")))
                .forEach(mount -> mount.put("readOnly", true)))
                .nodePlugin().isEmpty());
    }

    @Test
    void theServersReadTheirCredentialsFromTheGeneratedSecrets() throws Exception {
        assertEquals(List.of(), checks().credentials());
        assertFalse(broken(m -> replaceArg(m, "DaemonSet", "strata-node", "node-server", "--agent-tls-ca",
                "--agent-tls-ca=/etc/strata/agent/ca.pem")).credentials().isEmpty());
        assertFalse(broken(m -> Tree.map(m.pod("DaemonSet", "strata-node").volume("agent-credentials").orElseThrow(), "secret")
                .put("secretName", "strata-controller-credentials")).credentials().isEmpty(), "a node must not mount the controller's pair");
        assertFalse(broken(m -> Tree.map(m.pod("Deployment", "strata-controller").volume("agent-credentials").orElseThrow(), "secret")
                .put("secretName", "strata-node-credentials")).credentials().isEmpty(), "the controller serves its own pair");
    }

    @Test
    void nodesPresentTheirIdentityAndTheControllerChecksIt() throws Exception {
        assertEquals(List.of(), checks().identity());
        assertFalse(broken(m -> replaceArg(m, "Deployment", "strata-controller", "controller-server", "--agent-identity-callers",
                "--agent-identity-callers=strata-system/strata-controller")).identity().isEmpty(), "registrations come from nodes");
        assertFalse(broken(m -> args(m, "Deployment", "strata-controller", "controller-server")
                .add("--agent-identity-token-file=/var/run/secrets/strata/identity/token")).identity().isEmpty(),
                "the controller sends no token to the nodes");
        assertFalse(broken(m -> m.pod("DaemonSet", "strata-node").volume("identity").ifPresent(volume -> Tree
                .map(Tree.maps(volume, "projected", "sources").getFirst(), "serviceAccountToken").put("audience", "https://kubernetes.default.svc")))
                .identity().isEmpty(), "a token for the apiserver's audience would be worth something there");
        assertFalse(broken(m -> m.pod("DaemonSet", "strata-node").volume("identity").ifPresent(volume -> Tree
                .map(Tree.maps(volume, "projected", "sources").getFirst(), "serviceAccountToken").put("expirationSeconds", 3600)))
                .identity().isEmpty(), "a deleted pod's token would register its node for an hour");
        assertFalse(broken(m -> m.pod("DaemonSet", "strata-node").spec().remove("volumes")).identity().isEmpty());
        assertFalse(broken(m -> Tree.list(m.one("ClusterRoleBinding", "strata-token-keys").body(), "subjects").removeLast())
                .identity().isEmpty(), "controller-server must be allowed to read the keys");
    }

    @Test
    void storageClassesTakeOnlyParametersTheBackendsKnow() throws Exception {
        assertEquals(List.of(), checks().storageClasses());
        List<String> names = new ArrayList<>(manifests().ofKind("StorageClass").stream().map(KubeObject::name).toList());
        names.sort(null);
        assertEquals(List.of("strata-local-encrypted", "strata-local-ext4", "strata-local-xfs", "strata-nfs"), names);
        assertFalse(broken(m -> Tree.map(m.one("StorageClass", "strata-local-ext4").body(), "parameters").put("fsType", "ext4"))
                .storageClasses().isEmpty(), "the shipped classes write the current filesystem key");
        assertEquals(1, broken(m -> Tree.map(m.one("StorageClass", "strata-local-xfs").body(), "parameters").put("allocaton", "full"))
                .storageClasses().size(), "a misspelt key");
        assertFalse(broken(m -> m.one("StorageClass", "strata-nfs").body().put("allowVolumeExpansion", false))
                .storageClasses().isEmpty());
    }

    @Test
    void bothServersServeMetricsWherePrometheusLooks() throws Exception {
        assertEquals(List.of(), checks().metricsScraped());
        assertFalse(broken(m -> args(m, "DaemonSet", "strata-node", "node-server").removeIf(arg -> String.valueOf(arg).startsWith("--http-endpoint")))
                .metricsScraped().isEmpty());
        assertFalse(broken(m -> Tree.map(m.one("Deployment", "strata-controller").body(), "spec", "template", "metadata", "annotations")
                .put("prometheus.io/port", "9808")).metricsScraped().isEmpty());
        // The readiness probe and the declared port must follow a moved endpoint.
        assertFalse(broken(m -> replaceArg(m, "Deployment", "strata-controller", "controller-server", "--http-endpoint",
                "--http-endpoint=:9999")).portsAgree().isEmpty());
    }

    @Test
    void alertRulesAreCompleteAndNameMetricsTheServersExport() throws Exception {
        var exported = ExportedMetrics.fromSources(Manifests.defaultDir());
        assertTrue(exported.containsAll(List.of("csi_plugin_operations_seconds", "strata_pool_capacity_bytes",
                "strata_agent_lease_age_seconds", "strata_agent_unresponsive", "strata_nfs_export_mount_failures_total")),
                exported.toString());
        assertEquals(List.of(), checks().alertRules(exported));
        List<Map<String, Object>> rules = Tree.maps(Tree.maps(manifests().alertRules(), "groups").getFirst(), "rules");
        assertTrue(rules.size() >= 4, rules.toString());
        // A metric renamed in the code but not in the rules, and a rule without its severity.
        assertFalse(checks().alertRules(Set.of("strata_pool_available_bytes", "strata_pool_capacity_bytes")).isEmpty());
        List<String> problems = broken(m -> Tree.maps(Tree.maps(m.alertRules(), "groups").getFirst(), "rules").getFirst()
                .remove("labels")).alertRules(exported);
        assertEquals(1, problems.size(), problems.toString());
        // Dropping the pool alert leaves that condition uncovered.
        problems = broken(m -> Tree.list(Tree.maps(m.alertRules(), "groups").getFirst(), "rules")
                .removeIf(rule -> String.valueOf(((Map<?, ?>) rule).get("expr")).contains("strata_pool_available_bytes")))
                .alertRules(exported);
        assertEquals(List.of("no alert uses strata_pool_available_bytes"), problems);
    }

    @Test
    void theNfsComponentLetsTheControllerMountExports() throws Exception {
        String kustomization = Files.readString(Manifests.defaultDir().resolve(Manifests.KUSTOMIZATION));
        assertEquals(List.of(), checks().nfsComponent(kustomization));
        Consumer<Manifests> noCapability = m -> Tree.list(nfsContainer(m), "securityContext", "capabilities", "add").clear();
        assertEquals(1, broken(noCapability).nfsComponent(kustomization).size());
        assertEquals(1, broken(m -> Tree.map(nfsContainer(m), "securityContext").put("allowPrivilegeEscalation", false))
                .nfsComponent(kustomization).size());
        assertEquals(1, broken(m -> Tree.maps(nfsContainer(m), "volumeMounts").getFirst().put("mountPath", "/exports"))
                .nfsComponent(kustomization).size());
        assertEquals(1, broken(m -> args(m, "Deployment", "strata-controller", "controller-server").add("--nfs-mount-exports=false"))
                .nfsComponent(kustomization).size());
        assertEquals(1, checks().nfsComponent(kustomization.replace("components/nfs-exports", "components/nfs")).size());
        // The base install keeps every capability dropped: the component is what adds one.
        assertTrue(Tree.at(manifests().pod("Deployment", "strata-controller").driver().body(), "securityContext", "capabilities", "add") == null);
    }

    private static Map<String, Object> nfsContainer(Manifests manifests) {
        Map<String, Object> patch = Tree.map(Tree.maps(manifests.nfsComponent(), "patches").getFirst(), "document");
        return Tree.maps(patch, "spec", "template", "spec", "containers").getFirst();
    }

    @Test
    void snapshotClassesAreAComponentThatNamesTheDriver() throws Exception {
        String kustomization = Files.readString(Manifests.defaultDir().resolve(Manifests.KUSTOMIZATION));
        assertEquals(List.of(), checks().snapshotClasses(kustomization));
        List<String> classes = manifests().ofComponent(Manifests.SNAPSHOT_CLASSES_COMPONENT).stream()
                .filter(object -> object.kind().equals("VolumeSnapshotClass")).map(KubeObject::name).sorted().toList();
        assertEquals(List.of("strata-local", "strata-local-copies", "strata-nfs"), classes);
        assertEquals(Map.of("copies", "2"), Tree.map(manifests().one("VolumeSnapshotClass", "strata-local-copies").body(), "parameters"));
        for (String name : classes) {
            assertEquals("Delete", Tree.string(manifests().one("VolumeSnapshotClass", name).body(), "deletionPolicy"));
        }
        // In the base, the install would fail on a cluster without the CRDs.
        List<String> inBase = broken(m -> Tree.list(m.kustomization(), "resources")
                .add("components/snapshot-classes/volumesnapshotclasses.yaml")).snapshotClasses(kustomization);
        assertEquals(3, inBase.size(), inBase.toString());
        assertEquals(1, checks().snapshotClasses(kustomization.replace("components/snapshot-classes", "components/snapshots")).size());
        assertFalse(broken(m -> m.one("VolumeSnapshotClass", "strata-nfs").body().put("driver", "nfs.csi.k8s.io"))
                .driverNameAgrees().isEmpty());
        assertEquals(1, broken(m -> m.one("VolumeSnapshotClass", "strata-nfs").body().put("deletionPolicy", "Keep"))
                .snapshotClasses(kustomization).size());
        assertEquals(1, broken(m -> m.one("VolumeSnapshotClass", "strata-local").body().put("apiVersion", "snapshot.storage.k8s.io/v1beta1"))
                .snapshotClasses(kustomization).size());
        assertEquals(1, broken(m -> m.one("VolumeSnapshotClass", "strata-nfs").body().put("parameters", Map.of("method", "archive")))
                .snapshotClasses(kustomization).size());
        // Two defaults for one driver: snapshot-controller could pick neither.
        assertEquals(1, broken(m -> Tree.map(m.one("VolumeSnapshotClass", "strata-nfs").body(), "metadata")
                .put("annotations", Map.of("snapshot.storage.kubernetes.io/is-default-class", "true"))).snapshotClasses(kustomization).size());
        assertFalse(broken(m -> m.all().removeIf(object -> object.kind().equals("VolumeSnapshotClass"))).snapshotClasses(kustomization).isEmpty());
    }

    /** The checks of the manifests with the snapshot metadata component applied, after {@code edit}. */
    private static ManifestChecks withSnapshotMetadata(Consumer<Manifests> edit) throws IOException {
        Manifests applied = manifests().apply(Manifests.SNAPSHOT_METADATA_COMPONENT);
        edit.accept(applied);
        return new ManifestChecks(applied);
    }

    @Test
    void theSnapshotMetadataComponentRunsTheSidecarWithItsCertificateAndRights() throws Exception {
        String kustomization = Files.readString(Manifests.defaultDir().resolve(Manifests.KUSTOMIZATION));
        ManifestChecks applied = withSnapshotMetadata(m -> { });
        assertEquals(List.of(), applied.snapshotMetadata(kustomization));
        assertEquals(List.of(), applied.sidecarsKnown());
        assertEquals(List.of(), applied.imagesPinned());
        assertEquals(List.of(), applied.rbac());
        assertEquals(List.of(), applied.socketsAgree());
        assertEquals(List.of(), applied.portsAgree());
        assertEquals(List.of(), applied.replicas());
        // Without the component, its grant is not installed: the base's rights stay exact.
        assertEquals(List.of(), checks().rbac());
        assertEquals(1, checks().snapshotMetadata(kustomization).size(), "the base runs no sidecar");
        // A flag of another sidecar, a right taken away, the sidecar on another socket.
        assertFalse(withSnapshotMetadata(m -> args(m, "Deployment", "strata-controller", "csi-snapshot-metadata").add("--leader-election"))
                .sidecarsKnown().isEmpty());
        List<String> noReview = withSnapshotMetadata(m -> Tree.list(m.one("ClusterRole", "strata-external-snapshot-metadata").body(), "rules")
                .removeIf(rule -> Tree.strings(rule, "resources").contains("tokenreviews"))).rbac();
        assertTrue(noReview.stream().anyMatch(problem -> problem.contains("lacks create authentication.k8s.io/tokenreviews (cluster)")),
                noReview.toString());
        assertFalse(withSnapshotMetadata(m -> replaceArg(m, "Deployment", "strata-controller", "csi-snapshot-metadata", "--csi-address",
                "--csi-address=/run/csi/socket")).socketsAgree().isEmpty());
        // The SnapshotMetadataService pointing elsewhere, without its CA, under another name; the certificate not mounted.
        assertEquals(1, withSnapshotMetadata(m -> Tree.map(m.one("SnapshotMetadataService", "strata.csi.dev").body(), "spec")
                .put("address", "strata-snapshot-metadata.strata-system:443")).snapshotMetadata(kustomization).size());
        assertEquals(1, withSnapshotMetadata(m -> m.components().get(Manifests.SNAPSHOT_METADATA_COMPONENT).remove("replacements"))
                .snapshotMetadata(kustomization).size());
        List<String> renamed = withSnapshotMetadata(m -> Tree.map(m.one("SnapshotMetadataService", "strata.csi.dev").body(), "metadata")
                .put("name", "strata")).snapshotMetadata(kustomization); // and the CA's replacement no longer finds it
        assertTrue(renamed.stream().anyMatch(problem -> problem.contains("not named after the driver")), renamed.toString());
        assertEquals(1, withSnapshotMetadata(m -> replaceArg(m, "Deployment", "strata-controller", "csi-snapshot-metadata", "--tls-key",
                "--tls-key=/tmp/tls.key")).snapshotMetadata(kustomization).size());
        assertEquals(1, withSnapshotMetadata(m -> Tree.map(m.one("CustomResourceDefinition", "snapshotmetadataservices.cbt.storage.k8s.io")
                .body(), "spec").put("scope", "Namespaced")).snapshotMetadata(kustomization).size());
        assertEquals(1, checks().snapshotMetadata(kustomization.replace("#   - " + Manifests.SNAPSHOT_METADATA_COMPONENT, ""))
                .stream().filter(problem -> problem.contains("show how to add")).count());
    }

    @Test
    void theSnapshotRestoreAndCloneExamplesHoldTogether() throws Exception {
        assertEquals(List.of(), checks().examplesAgree());
        Manifests manifests = manifests();
        KubeObject restored = manifests.one("PersistentVolumeClaim", "strata-example-restored");
        KubeObject clone = manifests.one("PersistentVolumeClaim", "strata-example-clone");
        assertEquals("VolumeSnapshot", Tree.string(restored.body(), "spec", "dataSource", "kind"));
        assertEquals("strata-example", Tree.string(clone.body(), "spec", "dataSource", "name"));
        assertEquals(1L << 30, ManifestChecks.storage(restored));
        // A snapshot of a claim that is not there, of a class that is not there.
        assertEquals(1, broken(m -> Tree.map(m.one("VolumeSnapshot", "strata-example-snapshot").body(), "spec", "source")
                .put("persistentVolumeClaimName", "strata-missing")).examplesAgree().size());
        assertEquals(1, broken(m -> Tree.map(m.one("VolumeSnapshot", "strata-example-snapshot").body(), "spec")
                .put("volumeSnapshotClassName", "strata")).examplesAgree().size());
        // A restore without the snapshot API group, and one smaller than its snapshot.
        assertEquals(1, broken(m -> Tree.map(m.one("PersistentVolumeClaim", "strata-example-restored").body(), "spec", "dataSource")
                .remove("apiGroup")).examplesAgree().size());
        assertEquals(1, broken(m -> Tree.map(m.one("PersistentVolumeClaim", "strata-example-restored").body(), "spec", "resources",
                "requests").put("storage", "512Mi")).examplesAgree().size());
        // A clone into another StorageClass or volume mode, or of a claim that is not there.
        assertEquals(1, broken(m -> Tree.map(m.one("PersistentVolumeClaim", "strata-example-clone").body(), "spec")
                .put("storageClassName", "strata-local-xfs")).examplesAgree().size());
        assertEquals(1, broken(m -> Tree.map(m.one("PersistentVolumeClaim", "strata-example-clone").body(), "spec")
                .put("volumeMode", "Block")).examplesAgree().size());
        assertEquals(1, broken(m -> Tree.map(m.one("PersistentVolumeClaim", "strata-example-clone").body(), "spec", "dataSource")
                .put("name", "strata-exmaple")).examplesAgree().size());
        assertEquals(1, broken(m -> Tree.maps(m.one("Pod", "strata-example-clone").body(), "spec", "volumes").getFirst()
                .put("persistentVolumeClaim", Map.of("claimName", "strata-clone"))).examplesAgree().size());
    }

    @Test
    void theSnapshotControllerIsOfTheSnapshottersRelease() throws Exception {
        String release = Sidecar.named(Sidecar.SNAPSHOTTER).version();
        assertEquals(List.of(), checks().snapshotController(release));
        // The sidecar moved to another release without the cluster's part (its refs and its image),
        // the image left at the one the release's manifest names, and the CRDs left out.
        assertEquals(2, checks().snapshotController("v8.7.0").size());
        assertEquals(1, broken(m -> m.snapshotController().remove("images")).snapshotController(release).size());
        assertEquals(1, broken(m -> m.snapshotController().put("resources", Tree.strings(m.snapshotController(), "resources")
                .subList(1, 2))).snapshotController(release).size());
    }

    @Test
    void theControllersSidecarsAreThoseOfTheCapabilitiesItAdvertises(@TempDir Path dir) throws Exception {
        Set<String> advertised = ControllerCapabilities.advertised(dir);
        assertTrue(advertised.containsAll(List.of("CREATE_DELETE_VOLUME", "PUBLISH_UNPUBLISH_VOLUME", "EXPAND_VOLUME",
                "CREATE_DELETE_SNAPSHOT")), advertised.toString());
        assertEquals(List.of(), checks().capabilitiesServed(advertised));
        // A driver without snapshots: the snapshotter would exit at start.
        Set<String> noSnapshots = new HashSet<>(advertised);
        noSnapshots.remove("CREATE_DELETE_SNAPSHOT");
        List<String> exits = checks().capabilitiesServed(noSnapshots);
        assertEquals(1, exits.size(), exits.toString());
        assertTrue(exits.getFirst().contains("csi-snapshotter needs CREATE_DELETE_SNAPSHOT"), exits.toString());
        // Snapshots advertised, but no snapshotter to take them.
        List<String> untaken = broken(m -> m.pod("Deployment", "strata-controller").spec().put("containers",
                Tree.maps(m.pod("Deployment", "strata-controller").spec(), "containers").stream()
                        .filter(c -> !"csi-snapshotter".equals(c.get("name"))).toList())).capabilitiesServed(advertised);
        assertEquals(1, untaken.size(), untaken.toString());
        assertTrue(untaken.getFirst().contains("advertises CREATE_DELETE_SNAPSHOT"), untaken.toString());
    }
}
