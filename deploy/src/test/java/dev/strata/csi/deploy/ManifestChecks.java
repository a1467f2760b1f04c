package dev.strata.csi.deploy;

import dev.strata.csi.backend.KubernetesKeys;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.backend.nfs.NfsParameters;
import dev.strata.csi.deploy.PodTemplate.VolumePath;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The rules that hold the manifests together. Each check returns the problems it finds, as
 * sentences naming the object, so that a test can show them all and another can make sure a
 * broken copy of the manifests is caught.
 */
final class ManifestChecks {

    static final String NAMESPACE = "strata-system";
    static final String KUBELET_DIR = "/var/lib/kubelet";
    private static final Set<String> NAMESPACED_KINDS = Set.of("ServiceAccount", "Role", "RoleBinding", "Service", "PodDisruptionBudget",
            "Deployment", "DaemonSet", "Secret", "ConfigMap");
    private static final Pattern VARIABLE = Pattern.compile("\\$\\(([A-Za-z0-9_]+)\\)");
    static final String SNAPSHOT_GROUP = "snapshot.storage.k8s.io";
    /** The API group of external-snapshot-metadata's SnapshotMetadataService. */
    static final String CBT_GROUP = "cbt.storage.k8s.io";
    private static final String DEFAULT_SNAPSHOT_CLASS = "snapshot.storage.kubernetes.io/is-default-class";
    private static final Set<String> DELETION_POLICIES = Set.of("Delete", "Retain");
    /** VolumeSnapshotClass parameters the backends take: none yet. */
    private static final Set<String> SNAPSHOT_PARAMETERS = dev.strata.csi.backend.local.LocalParameters.SNAPSHOT_CLASS.administrator();
    private static final String SNAPSHOT_CONTROLLER_IMAGE = "registry.k8s.io/sig-storage/snapshot-controller";
    private static final String EXTERNAL_SNAPSHOTTER = "https://github.com/kubernetes-csi/external-snapshotter";

    private final Manifests manifests;

    ManifestChecks(Manifests manifests) {
        this.manifests = manifests;
    }

    /** The name of the one CSIDriver object. */
    String driverName() {
        List<KubeObject> drivers = manifests.ofKind("CSIDriver");
        if (drivers.size() != 1) {
            throw new AssertionError("expected one CSIDriver, found " + drivers.size());
        }
        return drivers.getFirst().name();
    }

    /** Every document is a Kubernetes object, and the kustomization installs every file of deploy/ and nothing missing. */
    List<String> structure() throws java.io.IOException {
        List<String> problems = new ArrayList<>();
        for (KubeObject object : manifests.all()) {
            for (String field : List.of("apiVersion", "kind")) {
                if (Tree.string(object.body(), field) == null) {
                    problems.add(object.file().getFileName() + ": a document has no " + field);
                }
            }
            if (object.name() == null) {
                problems.add(object.file().getFileName() + ": a " + object.kind() + " has no metadata.name");
            }
        }
        Set<String> resources = new LinkedHashSet<>(Tree.strings(manifests.kustomization(), "resources"));
        if (resources.isEmpty()) {
            problems.add(Manifests.KUSTOMIZATION + " lists no resources");
        }
        for (String resource : resources) {
            if (!Files.isRegularFile(manifests.dir().resolve(resource))) {
                problems.add(Manifests.KUSTOMIZATION + " names " + resource + ", which does not exist");
            }
        }
        manifests.components().forEach((component, body) -> {
            for (String resource : Tree.strings(body, "resources")) {
                if (!Files.isRegularFile(manifests.dir().resolve(component).resolve(resource))) {
                    problems.add(component + " names " + resource + ", which does not exist");
                }
            }
        });
        for (Path file : Manifests.yamlFiles(manifests.dir())) {
            String relative = manifests.dir().relativize(file).toString();
            if (!relative.contains("/") && !relative.equals(Manifests.KUSTOMIZATION) && !resources.contains(relative)) {
                problems.add(relative + " is in deploy/ but not in " + Manifests.KUSTOMIZATION + "'s resources (examples go in examples/)");
            }
        }
        return problems;
    }

    /** Namespaced objects that are installed live in one namespace, which the kustomization creates. */
    List<String> namespaces() {
        List<String> problems = new ArrayList<>();
        boolean created = manifests.installed().stream()
                .anyMatch(object -> "Namespace".equals(object.kind()) && NAMESPACE.equals(object.name()));
        if (!created) {
            problems.add("no Namespace " + NAMESPACE + " is installed");
        }
        for (KubeObject object : manifests.installed()) {
            if (NAMESPACED_KINDS.contains(object.kind()) && !NAMESPACE.equals(object.namespace())) {
                problems.add(object.describe() + " is in namespace " + object.namespace() + ", not " + NAMESPACE);
            }
            for (Map<String, Object> subject : Tree.maps(object.body(), "subjects")) {
                if (!NAMESPACE.equals(Tree.string(subject, "namespace"))) {
                    problems.add(object.describe() + " binds " + subject.get("name") + " in namespace " + subject.get("namespace"));
                }
            }
        }
        return problems;
    }

    /**
     * The driver name of the CSIDriver object is the one every StorageClass, VolumeSnapshotClass,
     * server and kubelet path uses.
     */
    List<String> driverNameAgrees() {
        List<String> problems = new ArrayList<>();
        String driver = driverName();
        for (KubeObject storageClass : manifests.ofKind("StorageClass")) {
            String provisioner = Tree.string(storageClass.body(), "provisioner");
            if (!driver.equals(provisioner)) {
                problems.add(storageClass.describe() + " names provisioner " + provisioner + ", not " + driver);
            }
        }
        for (KubeObject snapshotClass : manifests.ofKind("VolumeSnapshotClass")) {
            String named = Tree.string(snapshotClass.body(), "driver");
            if (!driver.equals(named)) {
                problems.add(snapshotClass.describe() + " names driver " + named + ", not " + driver);
            }
        }
        for (KubeObject attributesClass : manifests.ofKind("VolumeAttributesClass")) {
            String named = Tree.string(attributesClass.body(), "driverName");
            if (!driver.equals(named)) { // external-provisioner refuses a claim whose class is another driver's
                problems.add(attributesClass.describe() + " names driver " + named + ", not " + driver);
            }
        }
        for (PodTemplate pod : manifests.pods()) {
            Container server = pod.driver();
            // Stated, not left to the default, so that renaming the driver cannot miss a server.
            Optional<String> name = server.flagValue("driver-name");
            if (!name.equals(Optional.of(driver))) {
                problems.add(pod.owner().describe() + ": " + server.name() + " runs with --driver-name " + name.orElse("(unset)")
                        + ", not " + driver);
            }
            for (Container sidecar : pod.sidecars()) {
                sidecar.flagValue("kubelet-registration-path").ifPresent(path -> {
                    String expected = KUBELET_DIR + "/plugins/" + driver + "/";
                    if (!path.startsWith(expected)) {
                        problems.add(pod.owner().describe() + ": " + sidecar.name() + " registers " + path
                                + ", which is not below " + expected);
                    }
                });
            }
        }
        return problems;
    }

    /**
     * Each sidecar's --csi-address is the very socket its pod's server listens on (the same volume
     * and file), and the registrar tells kubelet that socket's path on the host.
     */
    List<String> socketsAgree() {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            Container server = pod.driver();
            String where = pod.owner().describe() + ": ";
            String endpoint = server.flagValue("endpoint").orElse("");
            if (!endpoint.startsWith("unix:///")) {
                problems.add(where + server.name() + " --endpoint " + endpoint + " is not unix:///<path>");
                continue;
            }
            Optional<VolumePath> socket = pod.resolve(server, endpoint.substring("unix://".length()));
            if (socket.isEmpty()) {
                problems.add(where + server.name() + "'s socket " + endpoint + " is on no volume, so no sidecar can reach it");
                continue;
            }
            if (pod.sidecars().stream().noneMatch(sidecar -> sidecar.flag("csi-address").isPresent())) {
                problems.add(where + "no sidecar talks to " + server.name());
            }
            for (Container sidecar : pod.sidecars()) {
                Optional<String> address = sidecar.flagValue("csi-address");
                if (address.isEmpty()) {
                    continue;
                }
                String path = address.get().replaceFirst("^unix://", "");
                Optional<VolumePath> seen = pod.resolve(sidecar, path);
                if (!seen.equals(socket)) {
                    problems.add(where + sidecar.name() + " dials " + address.get() + " (" + seen.map(Object::toString).orElse("on no volume")
                            + ") but " + server.name() + " listens on " + endpoint + " (" + socket.get() + ")");
                }
                sidecar.flagValue("kubelet-registration-path").ifPresent(registered -> {
                    Optional<String> onHost = pod.hostPath(socket.get());
                    if (!onHost.equals(Optional.of(registered))) {
                        problems.add(where + sidecar.name() + " registers " + registered + " with kubelet, but the socket is at "
                                + onHost.orElse("no host path") + " on the host");
                    }
                });
            }
        }
        return problems;
    }

    /**
     * Every probe names a port its own container declares, and every declared port is one a
     * container of the pod listens on (from its flags); the Service reaches the controller's
     * registry and node-server dials that Service.
     */
    List<String> portsAgree() {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            String where = pod.owner().describe() + ": ";
            Set<Integer> listening = listeningPorts(pod);
            for (Container container : pod.containers()) {
                Map<String, Integer> ports = container.ports();
                for (Container.ProbePort probe : container.probePorts()) {
                    Integer number = probe.port() instanceof Integer port ? port : ports.get(String.valueOf(probe.port()));
                    if (number == null || (probe.port() instanceof Integer && !ports.containsValue(number))) {
                        problems.add(where + container.name() + "'s " + probe.probe() + " points at port " + probe.port()
                                + ", which the container does not declare");
                    } else if (!listening.contains(number)) {
                        problems.add(where + container.name() + "'s " + probe.probe() + " points at port " + number
                                + ", where no container of the pod listens");
                    }
                }
                ports.forEach((name, number) -> {
                    if (!listening.contains(number)) {
                        problems.add(where + container.name() + " declares port " + name + " (" + number + "), where nothing listens");
                    }
                });
            }
        }
        problems.addAll(serviceReachesController());
        return problems;
    }

    /**
     * Both servers serve /metrics (--http-endpoint) on a port their container declares as
     * http-metrics, and their pod template carries the prometheus.io annotations naming it.
     */
    List<String> metricsScraped() {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            String where = pod.owner().describe() + ": ";
            Optional<Integer> port = pod.driver().flagValue("http-endpoint").flatMap(Container::port);
            if (port.isEmpty()) {
                problems.add(where + pod.driver().name() + " has no --http-endpoint=host:port: no metrics");
                continue;
            }
            if (!port.equals(Optional.ofNullable(pod.driver().ports().get("http-metrics")))) {
                problems.add(where + pod.driver().name() + " serves metrics on " + port.get() + " but declares http-metrics as "
                        + pod.driver().ports().get("http-metrics"));
            }
            Object annotations = Tree.at(pod.owner().body(), "spec", "template", "metadata", "annotations");
            Map<?, ?> found = annotations instanceof Map<?, ?> map ? map : Map.of();
            Map<String, String> wanted = Map.of("prometheus.io/scrape", "true", "prometheus.io/port", String.valueOf(port.get()),
                    "prometheus.io/path", "/metrics");
            wanted.forEach((key, value) -> {
                if (!value.equals(found.get(key))) {
                    problems.add(where + "pod annotation " + key + " is " + found.get(key) + ", should be \"" + value + "\"");
                }
            });
        }
        return problems;
    }

    private static final Pattern METRIC = Pattern.compile("\\b((?:strata|csi_plugin)_[a-z0-9_]+)");
    private static final Set<String> SEVERITIES = Set.of("warning", "critical");

    /**
     * The example alerting rules (deploy/monitoring/alerts.yaml): each rule complete (alert, expr,
     * for, a severity, a summary), every metric an expression names one the servers export, and
     * the four conditions a platform team pages on covered, each by the metric that tells it.
     */
    List<String> alertRules(Set<String> exported) {
        List<String> problems = new ArrayList<>();
        Set<String> used = new HashSet<>();
        for (Map<String, Object> group : Tree.maps(manifests.alertRules(), "groups")) {
            for (Map<String, Object> rule : Tree.maps(group, "rules")) {
                Object alert = rule.get("alert");
                String where = "alert " + alert + ": ";
                if (!(alert instanceof String name) || name.isBlank()) {
                    problems.add("a rule of group " + group.get("name") + " has no alert name");
                }
                if (!(rule.get("expr") instanceof String expr) || expr.isBlank()) {
                    problems.add(where + "no expr");
                    continue;
                }
                if (!(rule.get("for") instanceof String duration) || !duration.matches("[0-9]+[smh]")) {
                    problems.add(where + "'for' is " + rule.get("for") + ", not a duration");
                }
                Object severity = Tree.at(rule, "labels", "severity");
                if (severity == null || !SEVERITIES.contains(severity)) {
                    problems.add(where + "severity label is " + Tree.at(rule, "labels", "severity"));
                }
                if (!(Tree.at(rule, "annotations", "summary") instanceof String)) {
                    problems.add(where + "no summary annotation");
                }
                Matcher metric = METRIC.matcher(expr);
                while (metric.find()) {
                    String name = metric.group(1).replaceFirst("_(bucket|count|sum)$", "");
                    used.add(name);
                    if (!exported.contains(name)) {
                        problems.add(where + "expr names " + metric.group(1) + ", which neither server exports");
                    }
                }
            }
        }
        for (String needed : List.of("strata_pool_available_bytes", "csi_plugin_operations_seconds",
                "strata_agent_lease_age_seconds", "strata_agent_unresponsive", "strata_nfs_export_reachable")) {
            if (!used.contains(needed)) {
                problems.add("no alert uses " + needed);
            }
        }
        return problems;
    }

    /**
     * The NFS component (deploy/components/nfs-exports) gives controller-server what mounting an
     * export takes: CAP_SYS_ADMIN (with allowPrivilegeEscalation, without which Kubernetes refuses
     * the capability), a mount the default AppArmor profile would refuse, and a writable directory
     * at --nfs-export-root; it patches a container that exists, and the kustomization names it.
     */
    List<String> nfsComponent(String kustomizationText) {
        List<String> problems = new ArrayList<>();
        Map<String, Object> component = manifests.nfsComponent();
        if (!"Component".equals(component.get("kind"))) {
            problems.add("components/nfs-exports is a " + component.get("kind") + ", not a Component");
        }
        if (!kustomizationText.contains("#   - " + Manifests.NFS_COMPONENT)) {
            problems.add("kustomization.yaml does not show how to add " + Manifests.NFS_COMPONENT);
        }
        List<Map<String, Object>> patches = Tree.maps(component, "patches");
        if (patches.size() != 1 || !(patches.getFirst().get("document") instanceof Map<?, ?>)) {
            problems.add("components/nfs-exports should name one patch file that exists: " + patches);
            return problems;
        }
        Map<String, Object> patch = Tree.map(patches.getFirst(), "document");
        PodTemplate controller = manifests.pod("Deployment", "strata-controller");
        if (!"Deployment".equals(patch.get("kind")) || !controller.owner().name().equals(Tree.at(patch, "metadata", "name"))
                || !controller.namespace().equals(Tree.at(patch, "metadata", "namespace"))) {
            problems.add("the NFS patch does not name the Deployment strata-controller in " + controller.namespace());
        }
        Map<String, Object> spec = Tree.map(patch, "spec", "template", "spec");
        List<Map<String, Object>> containers = Tree.maps(spec, "containers");
        if (containers.size() != 1 || !controller.driver().name().equals(containers.getFirst().get("name"))) {
            problems.add("the NFS patch should patch the one container " + controller.driver().name());
            return problems;
        }
        Map<String, Object> container = containers.getFirst();
        if (!Tree.strings(container, "securityContext", "capabilities", "add").contains("SYS_ADMIN")) {
            problems.add("the NFS patch does not add CAP_SYS_ADMIN, which mount.nfs needs");
        }
        if (!Boolean.TRUE.equals(Tree.at(container, "securityContext", "allowPrivilegeEscalation"))) {
            problems.add("the NFS patch must set allowPrivilegeEscalation: true; Kubernetes refuses CAP_SYS_ADMIN without it");
        }
        if (!"Unconfined".equals(Tree.at(container, "securityContext", "appArmorProfile", "type"))) {
            problems.add("the NFS patch leaves the default AppArmor profile, which refuses mount");
        }
        if (controller.driver().flagValue("nfs-mount-exports").filter(value -> value.equals("false")).isPresent()) {
            problems.add("controller-server runs with --nfs-mount-exports=false: it would not mount the exports");
        }
        // The program's default, as --help shows it, where the manifests do not give the flag.
        String exportRoot = controller.driver().flagValue("nfs-export-root").orElse("/var/lib/strata/exports");
        Optional<Map<String, Object>> mount = Tree.maps(container, "volumeMounts").stream()
                .filter(candidate -> exportRoot.equals(candidate.get("mountPath"))).findFirst();
        Optional<Map<String, Object>> volume = mount.flatMap(m -> Tree.maps(spec, "volumes").stream()
                .filter(candidate -> m.get("name").equals(candidate.get("name"))).findFirst());
        if (volume.isEmpty() || !volume.get().containsKey("emptyDir") || Boolean.TRUE.equals(mount.get().get("readOnly"))) {
            problems.add("the NFS patch mounts no writable emptyDir at --nfs-export-root " + exportRoot
                    + " (the root filesystem is read-only)");
        }
        return problems;
    }

    /**
     * The snapshot metadata component (checked on a copy it is applied to): the kustomization shows
     * how to add it and the base holds nothing of it; the SnapshotMetadataService is named after the
     * driver and gives the address of a Service that leads to the sidecar's --port, an audience, and
     * the CA of the generated Secret (a replacement copies it in); the sidecar's --tls-cert and
     * --tls-key are that Secret's files; the CRD defines the resource as the sidecar's release reads it.
     */
    List<String> snapshotMetadata(String kustomizationText) {
        List<String> problems = new ArrayList<>();
        String name = Manifests.SNAPSHOT_METADATA_COMPONENT;
        Map<String, Object> component = manifests.components().get(name);
        if (!"Component".equals(component.get("kind"))) {
            problems.add(name + " is a " + component.get("kind") + ", not a Component");
        }
        if (!kustomizationText.contains("#   - " + name)) {
            problems.add("kustomization.yaml does not show how to add " + name);
        }
        if (manifests.installed().stream().anyMatch(object -> String.valueOf(object.body().get("apiVersion")).startsWith(CBT_GROUP + "/"))) {
            problems.add("the base installs an object of " + CBT_GROUP + ", whose CRD is in " + name);
        }
        PodTemplate pod = manifests.pod("Deployment", "strata-controller");
        Optional<Container> sidecar = pod.sidecars().stream()
                .filter(container -> container.imageRepository().equals(Sidecar.SNAPSHOT_METADATA)).findFirst();
        if (sidecar.isEmpty()) {
            problems.add("the controller pod runs no " + Sidecar.SNAPSHOT_METADATA + " with " + name);
            return problems;
        }
        // The Secret the component generates, its files by key, and where the sidecar reads its certificate.
        Map<String, Object> generator = Tree.maps(component, "secretGenerator").stream().findFirst().orElse(Map.of());
        String secret = String.valueOf(generator.get("name"));
        Map<String, String> files = new TreeMap<>();
        for (String file : Tree.strings(generator, "files")) {
            int equals = file.indexOf('=');
            files.put(equals < 0 ? file.substring(file.lastIndexOf('/') + 1) : file.substring(0, equals), file.substring(equals + 1));
        }
        for (String flag : List.of("tls-cert", "tls-key")) {
            String path = sidecar.get().flagValue(flag).orElse("");
            Optional<VolumePath> file = pod.resolve(sidecar.get(), path);
            Optional<String> secretName = file.flatMap(f -> pod.volume(f.volume())).map(volume -> Tree.string(volume, "secret", "secretName"));
            String key = file.map(VolumePath::relative).orElse("");
            if (!secretName.equals(Optional.of(secret)) || !files.containsKey(key)) {
                problems.add("the sidecar's --" + flag + " " + path + " is not a file of the generated Secret " + secret + " " + files.keySet());
            }
        }
        List<KubeObject> services = manifests.ofComponent(name).stream().filter(object -> object.kind().equals("SnapshotMetadataService")).toList();
        if (services.size() != 1) {
            problems.add(name + " holds " + services.size() + " SnapshotMetadataServices; one, named after the driver, must");
            return problems;
        }
        KubeObject service = services.getFirst();
        if (!driverName().equals(service.name())) {
            problems.add(service.describe() + " is not named after the driver " + driverName() + ": backup tools look it up by that name");
        }
        if (Tree.string(service.body(), "spec", "audience") == null || Tree.string(service.body(), "spec", "audience").isBlank()) {
            problems.add(service.describe() + " names no audience");
        }
        String address = String.valueOf(Tree.at(service.body(), "spec", "address"));
        String[] host = address.substring(0, Math.max(0, address.lastIndexOf(':'))).split("\\.");
        Optional<Integer> port = Container.port(address);
        Optional<Object> target = manifests.ofComponent(name).stream()
                .filter(object -> object.kind().equals("Service") && host.length == 2 && object.name().equals(host[0])
                        && object.namespace().equals(host[1]) && selects(Tree.map(object.body(), "spec", "selector"), pod))
                .flatMap(object -> Tree.maps(object.body(), "spec", "ports").stream())
                .filter(servicePort -> port.isPresent() && port.get().equals(servicePort.get("port")))
                .map(servicePort -> servicePort.get("targetPort")).findFirst();
        Object targetPort = target.orElse(null);
        Integer targetNumber = targetPort instanceof Integer number ? number : sidecar.get().ports().get(String.valueOf(targetPort));
        if (targetNumber == null || !sidecar.get().flagValue("port").flatMap(Container::port).equals(Optional.of(targetNumber))) {
            problems.add(service.describe() + "'s address " + address + " leads to no Service port of the controller pods that reaches the"
                    + " sidecar's --port");
        }
        boolean caReplaced = Tree.maps(component, "replacements").stream().anyMatch(replacement ->
                secret.equals(Tree.string(replacement, "source", "name"))
                        && ("data." + files.entrySet().stream().filter(e -> e.getValue().endsWith("ca.crt")).map(Map.Entry::getKey)
                                .findFirst().orElse("?")).equals(Tree.string(replacement, "source", "fieldPath"))
                        && Tree.maps(replacement, "targets").stream().anyMatch(t -> service.name().equals(Tree.string(t, "select", "name"))
                                && Tree.strings(t, "fieldPaths").contains("spec.caCert")));
        if (!caReplaced) {
            problems.add(service.describe() + "'s caCert is not filled in from the generated Secret's CA certificate");
        }
        List<KubeObject> crds = manifests.ofComponent(name).stream().filter(object -> object.kind().equals("CustomResourceDefinition")).toList();
        boolean defined = crds.stream().anyMatch(crd -> CBT_GROUP.equals(Tree.string(crd.body(), "spec", "group"))
                && "SnapshotMetadataService".equals(Tree.string(crd.body(), "spec", "names", "kind"))
                && "snapshotmetadataservices".equals(Tree.string(crd.body(), "spec", "names", "plural"))
                && "Cluster".equals(Tree.string(crd.body(), "spec", "scope"))
                && Tree.maps(crd.body(), "spec", "versions").stream().anyMatch(version -> "v1beta1".equals(version.get("name"))
                        && Boolean.TRUE.equals(version.get("served")) && Boolean.TRUE.equals(version.get("storage"))
                        && Tree.strings(version, "schema", "openAPIV3Schema", "properties", "spec", "required")
                                .containsAll(List.of("address", "audience", "caCert"))));
        if (!defined) {
            problems.add(name + " does not define SnapshotMetadataService (" + CBT_GROUP + "/v1beta1, cluster-scoped, spec.address,"
                    + " audience and caCert required) as external-snapshot-metadata v1.1.0 reads it");
        }
        return problems;
    }

    /**
     * Snapshots: the base installs nothing of the snapshot CRDs' group (on a cluster without them
     * the whole apply would fail); the VolumeSnapshotClasses are in their component, which the
     * kustomization shows how to add, each of snapshot.storage.k8s.io/v1 with a deletionPolicy and
     * no parameter the driver does not take, and at most one of them the driver's default.
     */
    List<String> snapshotClasses(String kustomizationText) {
        List<String> problems = new ArrayList<>();
        for (KubeObject object : manifests.installed()) {
            if (String.valueOf(object.body().get("apiVersion")).startsWith(SNAPSHOT_GROUP + "/")) {
                problems.add(object.describe() + " is in the base, whose apply would then fail on a cluster without the snapshot CRDs");
            }
        }
        String component = Manifests.SNAPSHOT_CLASSES_COMPONENT;
        if (!"Component".equals(Tree.string(manifests.components().get(component), "kind"))) {
            problems.add(component + " is not a kustomize Component");
        }
        if (!kustomizationText.contains("#   - " + component)) {
            problems.add(Manifests.KUSTOMIZATION + " does not show how to add " + component);
        }
        if (manifests.ofComponent(component).stream().noneMatch(object -> "VolumeSnapshotClass".equals(object.kind()))) {
            problems.add(component + " holds no VolumeSnapshotClass");
        }
        long defaults = 0;
        for (KubeObject snapshotClass : manifests.ofKind("VolumeSnapshotClass")) {
            if (!(SNAPSHOT_GROUP + "/v1").equals(Tree.string(snapshotClass.body(), "apiVersion"))) {
                problems.add(snapshotClass.describe() + " is not " + SNAPSHOT_GROUP + "/v1");
            }
            if (!DELETION_POLICIES.contains(Tree.string(snapshotClass.body(), "deletionPolicy"))) {
                problems.add(snapshotClass.describe() + ": deletionPolicy must be one of " + DELETION_POLICIES);
            }
            for (String parameter : Tree.map(snapshotClass.body(), "parameters").keySet()) {
                if (!SNAPSHOT_PARAMETERS.contains(parameter)) {
                    problems.add(snapshotClass.describe() + ": parameter " + parameter + " is not one the backends take " + SNAPSHOT_PARAMETERS);
                }
            }
            if ("true".equals(Tree.string(snapshotClass.body(), "metadata", "annotations", DEFAULT_SNAPSHOT_CLASS))) {
                defaults++;
            }
        }
        if (defaults > 1) {
            problems.add(defaults + " VolumeSnapshotClasses are the driver's default; snapshot-controller refuses a snapshot then");
        }
        return problems;
    }

    /**
     * The examples' snapshot, restore and clone hold together: a VolumeSnapshot names a class of
     * the manifests and a claim of the examples; a claim restored from a VolumeSnapshot
     * (snapshot.storage.k8s.io) names one of the examples and asks for at least its source's size;
     * a clone names a claim of the examples in its namespace, StorageClass and volume mode, and asks
     * for at least its size; every claim's StorageClass and every pod's claim exist.
     */
    List<String> examplesAgree() {
        List<String> problems = new ArrayList<>();
        Map<String, KubeObject> claims = examplesByName("PersistentVolumeClaim");
        Map<String, KubeObject> snapshots = examplesByName("VolumeSnapshot");
        Set<String> storageClasses = names("StorageClass");
        Set<String> snapshotClasses = names("VolumeSnapshotClass");
        for (KubeObject snapshot : snapshots.values()) {
            String snapshotClass = Tree.string(snapshot.body(), "spec", "volumeSnapshotClassName");
            if (!snapshotClasses.contains(snapshotClass)) {
                problems.add(snapshot.describe() + " names VolumeSnapshotClass " + snapshotClass + ", which is not in the manifests");
            }
            String source = Tree.string(snapshot.body(), "spec", "source", "persistentVolumeClaimName");
            if (!claims.containsKey(source)) {
                problems.add(snapshot.describe() + " is of claim " + source + ", which is not in the examples");
            }
        }
        for (KubeObject claim : claims.values()) {
            String storageClass = Tree.string(claim.body(), "spec", "storageClassName");
            if (!storageClasses.contains(storageClass)) {
                problems.add(claim.describe() + " names StorageClass " + storageClass + ", which is not in the manifests");
            }
            Map<String, Object> dataSource = Tree.map(claim.body(), "spec", "dataSource");
            if (dataSource.isEmpty()) {
                continue;
            }
            String kind = Tree.string(dataSource, "kind");
            String group = Tree.string(dataSource, "apiGroup");
            String name = Tree.string(dataSource, "name");
            KubeObject sourceClaim;
            if ("VolumeSnapshot".equals(kind)) {
                if (!SNAPSHOT_GROUP.equals(group)) {
                    problems.add(claim.describe() + ": a VolumeSnapshot data source needs apiGroup " + SNAPSHOT_GROUP);
                }
                KubeObject snapshot = snapshots.get(name);
                if (snapshot == null) {
                    problems.add(claim.describe() + " is restored from VolumeSnapshot " + name + ", which is not in the examples");
                    continue;
                }
                sourceClaim = claims.get(Tree.string(snapshot.body(), "spec", "source", "persistentVolumeClaimName"));
            } else if ("PersistentVolumeClaim".equals(kind)) {
                if (group != null && !group.isEmpty()) {
                    problems.add(claim.describe() + ": a claim as data source is of the core group, not " + group);
                }
                sourceClaim = claims.get(name);
                if (sourceClaim == null) {
                    problems.add(claim.describe() + " is cloned from claim " + name + ", which is not in the examples");
                    continue;
                }
                if (!Objects.equals(storageClass, Tree.string(sourceClaim.body(), "spec", "storageClassName"))
                        || !volumeMode(claim).equals(volumeMode(sourceClaim))
                        || !Objects.equals(claim.namespace(), sourceClaim.namespace())) {
                    problems.add(claim.describe() + " clones " + name + " of another StorageClass, volume mode or namespace,"
                            + " which Kubernetes refuses");
                }
            } else {
                problems.add(claim.describe() + ": data source kind " + kind + " is neither VolumeSnapshot nor PersistentVolumeClaim");
                continue;
            }
            if (sourceClaim != null && storage(claim) < storage(sourceClaim)) {
                problems.add(claim.describe() + " asks for less than its source " + sourceClaim.name() + " holds");
            }
        }
        for (KubeObject pod : manifests.examples().stream().filter(object -> "Pod".equals(object.kind())).toList()) {
            for (Map<String, Object> volume : Tree.maps(pod.body(), "spec", "volumes")) {
                String claimName = Tree.string(volume, "persistentVolumeClaim", "claimName");
                if (claimName != null && !claims.containsKey(claimName)) {
                    problems.add(pod.describe() + " uses claim " + claimName + ", which is not in the examples");
                }
            }
        }
        return problems;
    }

    private Map<String, KubeObject> examplesByName(String kind) {
        Map<String, KubeObject> byName = new TreeMap<>();
        manifests.examples().stream().filter(object -> kind.equals(object.kind())).forEach(object -> byName.put(object.name(), object));
        return byName;
    }

    private Set<String> names(String kind) {
        Set<String> names = new HashSet<>();
        manifests.ofKind(kind).forEach(object -> names.add(object.name()));
        return names;
    }

    private static String volumeMode(KubeObject claim) {
        String mode = Tree.string(claim.body(), "spec", "volumeMode");
        return mode == null ? "Filesystem" : mode;
    }

    /** The claim's storage request in bytes; -1 when it has none or it is not a quantity. */
    static long storage(KubeObject claim) {
        String quantity = Tree.string(claim.body(), "spec", "resources", "requests", "storage");
        return Quantities.bytes(quantity);
    }

    /**
     * deploy/snapshot-controller installs the snapshot CRDs and snapshot-controller of
     * external-snapshotter at {@code release} (the csi-snapshotter's, {@link Sidecar#SNAPSHOTTER}),
     * and runs that release's image (a release's manifest names the image of the release before it).
     */
    List<String> snapshotController(String release) {
        List<String> problems = new ArrayList<>();
        List<String> resources = Tree.strings(manifests.snapshotController(), "resources");
        List<String> wanted = List.of(EXTERNAL_SNAPSHOTTER + "//client/config/crd?ref=" + release,
                EXTERNAL_SNAPSHOTTER + "//deploy/kubernetes/snapshot-controller?ref=" + release);
        if (!resources.equals(wanted)) {
            problems.add(Manifests.SNAPSHOT_CONTROLLER + " installs " + resources + ", not the CRDs and snapshot-controller of "
                    + release + " " + wanted);
        }
        boolean imageOfRelease = Tree.maps(manifests.snapshotController(), "images").stream()
                .anyMatch(image -> SNAPSHOT_CONTROLLER_IMAGE.equals(image.get("name")) && release.equals(image.get("newTag"))
                        && image.get("newName") == null);
        if (!imageOfRelease) {
            problems.add(Manifests.SNAPSHOT_CONTROLLER + " does not set " + SNAPSHOT_CONTROLLER_IMAGE + " to " + release);
        }
        return problems;
    }

    /**
     * The controller pod's sidecars and the capabilities controller-server advertises agree: each
     * sidecar calls a capability that is advertised (a csi-snapshotter beside a driver without
     * CREATE_DELETE_SNAPSHOT exits at start), and each advertised capability that a sidecar of the
     * table calls has that sidecar in the pod (snapshots advertised without csi-snapshotter would
     * never be taken).
     */
    List<String> capabilitiesServed(Set<String> advertised) {
        List<String> problems = new ArrayList<>();
        PodTemplate pod = manifests.pod("Deployment", "strata-controller");
        Set<String> called = new HashSet<>();
        for (Container sidecar : pod.sidecars()) {
            Sidecar.of(sidecar).flatMap(Sidecar::controllerCapability).ifPresent(capability -> {
                called.add(capability);
                if (!advertised.contains(capability)) {
                    problems.add(pod.owner().describe() + ": " + sidecar.name() + " needs " + capability
                            + ", which controller-server does not advertise " + advertised);
                }
            });
        }
        for (Sidecar known : Sidecar.ALL) {
            known.controllerCapability().filter(advertised::contains).filter(capability -> !called.contains(capability))
                    .ifPresent(capability -> problems.add("controller-server advertises " + capability + ", but "
                            + pod.owner().describe() + " runs no " + known.image() + " to call it"));
        }
        return problems;
    }

    /** Ports the pod's containers serve on, from the flags that set listening addresses. */
    private static Set<Integer> listeningPorts(PodTemplate pod) {
        Set<Integer> ports = new HashSet<>();
        for (Container container : pod.containers()) {
            for (String flag : List.of("http-endpoint", "agent-registry-address", "agent-address", "port")) {
                container.flagValue(flag).flatMap(Container::port).ifPresent(ports::add);
            }
        }
        return ports;
    }

    private List<String> serviceReachesController() {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            Optional<String> address = pod.driver().flagValue("controller-address");
            if (address.isEmpty()) {
                continue;
            }
            String value = address.get();
            int colon = value.lastIndexOf(':');
            String host = colon < 0 ? value : value.substring(0, colon);
            Optional<Integer> port = Container.port(value);
            String[] parts = host.split("\\.");
            Optional<KubeObject> service = manifests.ofKind("Service").stream()
                    .filter(candidate -> parts.length >= 2 && candidate.name().equals(parts[0]) && candidate.namespace().equals(parts[1]))
                    .findFirst();
            if (service.isEmpty()) {
                problems.add(pod.owner().describe() + ": --controller-address " + value + " names no Service of the manifests");
                continue;
            }
            Optional<Map<String, Object>> servicePort = Tree.maps(service.get().body(), "spec", "ports").stream()
                    .filter(candidate -> port.isPresent() && port.get().equals(candidate.get("port"))).findFirst();
            if (servicePort.isEmpty()) {
                problems.add(service.get().describe() + " has no port " + port.orElse(null) + " for --controller-address " + value);
                continue;
            }
            // A Service with a cluster IP would send each agent to one replica only; the others would not know it.
            if (!"None".equals(Tree.string(service.get().body(), "spec", "clusterIP"))) {
                problems.add(service.get().describe() + " is not headless (clusterIP: None): an agent would register with one replica only");
            }
            if (!Boolean.TRUE.equals(Tree.at(service.get().body(), "spec", "publishNotReadyAddresses"))) {
                problems.add(service.get().describe() + " lists only ready pods: a starting replica would learn the agents late");
            }
            Map<String, Object> selector = Tree.map(service.get().body(), "spec", "selector");
            List<PodTemplate> selected = manifests.pods().stream()
                    .filter(candidate -> !selector.isEmpty() && candidate.labels().entrySet().containsAll(selector.entrySet())).toList();
            Object target = servicePort.get().get("targetPort");
            boolean reaches = selected.stream().anyMatch(candidate -> {
                Integer number = target instanceof Integer n ? n : candidate.driver().ports().get(String.valueOf(target));
                return number != null && candidate.driver().flagValue("agent-registry-address").flatMap(Container::port)
                        .equals(Optional.of(number));
            });
            if (!reaches) {
                problems.add(service.get().describe() + " does not lead to a controller-server's --agent-registry-address");
            }
        }
        return problems;
    }

    /**
     * The controller runs as replicas that fail over: at least two, preferably on different nodes,
     * with every sidecar that knows leader election using it (two leaders would provision and
     * attach at once), and a PodDisruptionBudget that keeps one of them through a drain.
     */
    List<String> replicas() {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            if (!pod.owner().kind().equals("Deployment")) {
                continue;
            }
            String where = pod.owner().describe() + ": ";
            Object replicas = Tree.at(pod.owner().body(), "spec", "replicas");
            if (!(replicas instanceof Integer count) || count < 2) {
                problems.add(where + "runs " + replicas + " replica(s); a failover needs at least 2");
            }
            for (Container sidecar : pod.sidecars()) {
                boolean elects = Sidecar.of(sidecar).map(known -> known.knownFlags().contains("leader-election")).orElse(false);
                Optional<Container.Arg> flag = sidecar.flag("leader-election");
                if (elects && (flag.isEmpty() || !(flag.get().value() == null || flag.get().value().equals("true")))) {
                    problems.add(where + sidecar.name() + " runs without --leader-election: every replica's would act at once");
                }
            }
            boolean spread = Tree.maps(pod.spec(), "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution")
                    .stream().map(term -> Tree.map(term, "podAffinityTerm"))
                    .anyMatch(term -> "kubernetes.io/hostname".equals(Tree.string(term, "topologyKey"))
                            && selects(Tree.map(term, "labelSelector", "matchLabels"), pod));
            if (!spread) {
                problems.add(where + "has no preferred pod anti-affinity by kubernetes.io/hostname for its own pods");
            }
            List<KubeObject> budgets = manifests.ofKind("PodDisruptionBudget").stream()
                    .filter(budget -> selects(Tree.map(budget.body(), "spec", "selector", "matchLabels"), pod)).toList();
            if (budgets.size() != 1) {
                problems.add(where + budgets.size() + " PodDisruptionBudgets select its pods; one must");
            } else if (!Integer.valueOf(1).equals(Tree.at(budgets.getFirst().body(), "spec", "minAvailable"))) {
                problems.add(budgets.getFirst().describe() + " must keep minAvailable: 1 (a drain may take all but one replica, never the last)");
            }
        }
        for (KubeObject budget : manifests.ofKind("PodDisruptionBudget")) {
            Map<String, Object> selector = Tree.map(budget.body(), "spec", "selector", "matchLabels");
            if (manifests.pods().stream().filter(pod -> selects(selector, pod)).count() != 1) {
                problems.add(budget.describe() + " must select the pods of exactly one workload");
            }
        }
        return problems;
    }

    /** Whether a non-empty label selector matches the pods of {@code pod}. */
    private static boolean selects(Map<String, Object> selector, PodTemplate pod) {
        return !selector.isEmpty() && pod.labels().entrySet().containsAll(selector.entrySet());
    }

    /** Sidecars are pinned releases of our table, with the flags they need, all known to that release. */
    List<String> sidecarsKnown() {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            for (Container sidecar : pod.sidecars()) {
                String where = pod.owner().describe() + ": " + sidecar.name() + ": ";
                Optional<Sidecar> known = Sidecar.of(sidecar);
                if (known.isEmpty()) {
                    problems.add(where + "image " + sidecar.image() + " is not in the sidecar table (Sidecar.ALL)");
                    continue;
                }
                if (!known.get().version().equals(sidecar.imageTag())) {
                    problems.add(where + "runs " + sidecar.image() + ", but the table describes " + known.get().version());
                }
                for (Container.Arg arg : sidecar.flags()) {
                    if (!known.get().knownFlags().contains(arg.name())) {
                        problems.add(where + "--" + arg.name() + " is not a flag of " + known.get().image() + ":" + known.get().version());
                    }
                }
                for (String required : known.get().requiredFlags()) {
                    if (sidecar.flag(required).isEmpty()) {
                        problems.add(where + "lacks --" + required);
                    }
                }
                problems.addAll(variablesDefined(where, sidecar));
            }
        }
        problems.addAll(capacityOwner());
        return problems;
    }

    /** $(VAR) in args expands only if the container defines VAR; Kubernetes would pass "$(VAR)" on silently. */
    private static List<String> variablesDefined(String where, Container container) {
        List<String> problems = new ArrayList<>();
        for (String arg : container.args()) {
            Matcher variable = VARIABLE.matcher(arg);
            while (variable.find()) {
                if (!container.env().containsKey(variable.group(1))) {
                    problems.add(where + arg + " uses $(" + variable.group(1) + "), which the container does not define");
                }
            }
        }
        return problems;
    }

    /**
     * external-provisioner finds the owner of its CSIStorageCapacity objects from POD_NAME and
     * NAMESPACE, walking up --capacity-ownerref-level owners: 2 reaches a Deployment.
     */
    private List<String> capacityOwner() {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            for (Container sidecar : pod.sidecars()) {
                if (sidecar.flag("enable-capacity").isEmpty()) {
                    continue;
                }
                String where = pod.owner().describe() + ": " + sidecar.name() + ": ";
                Map<String, String> env = sidecar.env();
                if (!"fieldRef:metadata.name".equals(env.get("POD_NAME")) || !"fieldRef:metadata.namespace".equals(env.get("NAMESPACE"))) {
                    problems.add(where + "--enable-capacity needs POD_NAME and NAMESPACE from metadata.name and metadata.namespace");
                }
                int level = switch (pod.owner().kind()) {
                    case "Deployment" -> 2;
                    case "StatefulSet", "DaemonSet" -> 1;
                    default -> 0;
                };
                if (!sidecar.flagValue("capacity-ownerref-level").equals(Optional.of(String.valueOf(level)))) {
                    problems.add(where + "a " + pod.owner().kind() + " needs --capacity-ownerref-level=" + level);
                }
            }
        }
        KubeObject driver = manifests.one("CSIDriver", driverName());
        boolean capacity = manifests.pods().stream().flatMap(pod -> pod.sidecars().stream())
                .anyMatch(sidecar -> sidecar.flag("enable-capacity").isPresent());
        if (capacity != Boolean.TRUE.equals(Tree.at(driver.body(), "spec", "storageCapacity"))) {
            problems.add(driver.describe() + ": storageCapacity must be true exactly when a provisioner has --enable-capacity");
        }
        return problems;
    }

    /**
     * Each pod's ServiceAccount is granted what its sidecars need (Sidecar.ALL) and nothing more;
     * a pod whose containers need nothing gets no API token.
     */
    List<String> rbac() {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            String where = pod.owner().describe() + " (ServiceAccount " + pod.serviceAccount() + "): ";
            Set<Rule> needed = new HashSet<>();
            pod.sidecars().forEach(sidecar -> Sidecar.of(sidecar).ifPresent(known -> needed.addAll(known.rules())));
            Set<Rule> granted = granted(pod);
            for (Rule rule : needed) {
                // A cluster-wide grant also covers the pod's own namespace.
                boolean covered = granted.contains(rule)
                        || (rule.inOwnNamespace() && granted.contains(new Rule(rule.group(), rule.resource(), rule.verb(), false)));
                if (!covered) {
                    problems.add(where + "lacks " + rule);
                }
            }
            for (Rule rule : granted) {
                if (!needed.contains(rule)) {
                    problems.add(where + "is granted " + rule + ", which none of its sidecars needs");
                }
            }
            if (needed.isEmpty() && !Boolean.FALSE.equals(Tree.at(pod.spec(), "automountServiceAccountToken"))) {
                problems.add(where + "needs no API access, so automountServiceAccountToken must be false");
            }
            boolean accountExists = manifests.ofKind("ServiceAccount").stream()
                    .anyMatch(account -> account.name().equals(pod.serviceAccount()) && pod.namespace().equals(account.namespace()));
            if (!accountExists) {
                problems.add(where + "the ServiceAccount is not in the manifests");
            }
        }
        return problems;
    }

    /** Every (verb, resource) the pod's ServiceAccount gets, expanded to single verbs. */
    private Set<Rule> granted(PodTemplate pod) {
        Set<Rule> granted = new HashSet<>();
        for (String bindingKind : List.of("ClusterRoleBinding", "RoleBinding")) {
            for (KubeObject binding : manifests.ofKind(bindingKind).stream().filter(manifests::inForce).toList()) {
                boolean bindsPod = Tree.maps(binding.body(), "subjects").stream().anyMatch(subject ->
                        "ServiceAccount".equals(subject.get("kind")) && pod.serviceAccount().equals(subject.get("name"))
                                && pod.namespace().equals(subject.get("namespace")));
                boolean inOwnNamespace = bindingKind.equals("RoleBinding");
                if (!bindsPod || (inOwnNamespace && !pod.namespace().equals(binding.namespace()))) {
                    continue;
                }
                String roleKind = Tree.string(binding.body(), "roleRef", "kind");
                String roleName = Tree.string(binding.body(), "roleRef", "name");
                KubeObject role = manifests.one(roleKind, roleName);
                for (Map<String, Object> rule : Tree.maps(role.body(), "rules")) {
                    for (String group : Tree.strings(rule, "apiGroups")) {
                        for (String resource : Tree.strings(rule, "resources")) {
                            for (String verb : Tree.strings(rule, "verbs")) {
                                granted.add(new Rule(group, resource, verb, inOwnNamespace));
                            }
                        }
                    }
                }
            }
        }
        return granted;
    }

    /**
     * Our servers: every flag and environment variable given is one the program declares, and the
     * whole command line parses (a repeated flag or a bad one fails it).
     */
    List<String> serverFlags() throws java.io.IOException, InterruptedException {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            Container server = pod.driver();
            String where = pod.owner().describe() + ": " + server.name() + ": ";
            Optional<ServerProgram> program = ServerProgram.of(server);
            if (program.isEmpty()) {
                problems.add(where + "the first argument " + server.args() + " names none of " + ServerProgram.ALL);
                continue;
            }
            ServerProgram.Usage usage = program.get().usage();
            for (Container.Arg arg : server.flags()) {
                if (!usage.flags().contains(arg.name())) {
                    problems.add(where + "--" + arg.name() + " is not a flag of " + program.get().jar());
                }
            }
            for (String variable : server.env().keySet()) {
                boolean usedInArgs = server.args().stream().anyMatch(arg -> arg.contains("$(" + variable + ")"));
                if (!usage.envs().contains(variable) && !usedInArgs) {
                    problems.add(where + "environment variable " + variable + " is read by neither " + program.get().jar()
                            + " nor its args");
                }
            }
            problems.addAll(variablesDefined(where, server));
            List<String> args = server.args().subList(1, server.args().size());
            ServerProgram.Run run = program.get().parse(args);
            if (run.exitCode() != 0) {
                problems.add(where + program.get().jar() + " refuses its arguments: " + run.stderr().strip());
            }
            String dockerfile = Files.readString(manifests.dir().getParent().resolve("Dockerfile"));
            if (!dockerfile.contains(server.args().getFirst())) {
                problems.add(where + "runs " + server.args().getFirst() + ", which the Dockerfile does not put in the image");
            }
        }
        return problems;
    }

    /**
     * The node plugin can do its work: privileged, kubelet's directory with Bidirectional
     * propagation at the same path, /dev, the pool on a host path at --pool-dir, and the host's
     * /sys/fs/cgroup at --cgroup-root (the pods' cgroups, for volumes' IO limits).
     */
    List<String> nodePlugin() {
        List<String> problems = new ArrayList<>();
        PodTemplate pod = manifests.pod("DaemonSet", "strata-node");
        Container server = pod.driver();
        String where = pod.owner().describe() + ": " + server.name() + ": ";
        if (!Boolean.TRUE.equals(Tree.at(server.body(), "securityContext", "privileged"))) {
            problems.add(where + "must be privileged (loop devices, mounts)");
        }
        Optional<Container.Mount> kubelet = server.mounts().stream().filter(mount -> mount.path().equals(KUBELET_DIR)).findFirst();
        if (kubelet.isEmpty() || !"Bidirectional".equals(kubelet.get().propagation())
                || !pod.hostPath(new VolumePath(kubelet.get().volume(), "")).equals(Optional.of(KUBELET_DIR))) {
            problems.add(where + "needs host " + KUBELET_DIR + " at " + KUBELET_DIR + " with Bidirectional mount propagation");
        }
        if (pod.resolve(server, "/dev/loop0").flatMap(pod::hostPath).filter("/dev/loop0"::equals).isEmpty()) {
            problems.add(where + "needs the host's /dev");
        }
        String poolDir = server.flagValue("pool-dir").orElse("/var/lib/strata/pool");
        if (pod.resolve(server, poolDir).flatMap(pod::hostPath).isEmpty()) {
            problems.add(where + "--pool-dir " + poolDir + " is not on a host path: volumes would go with the pod");
        }
        String cgroupRoot = server.flagValue("cgroup-root").orElse("/sys/fs/cgroup");
        boolean hostCgroups = pod.resolve(server, cgroupRoot).flatMap(pod::hostPath).filter("/sys/fs/cgroup"::equals).isPresent()
                && server.mounts().stream().filter(mount -> cgroupRoot.equals(mount.path())).noneMatch(Container.Mount::readOnly);
        if (!hostCgroups) {
            problems.add(where + "--cgroup-root " + cgroupRoot + " must be the host's /sys/fs/cgroup, writable: the pods' "
                    + "cgroups take the volumes' IO limits");
        }
        Map<String, String> env = server.env();
        boolean idIsNodeName = "fieldRef:spec.nodeName".equals(env.get("NODE_ID"))
                && server.flagValue("node-id").map("$(NODE_ID)"::equals).orElse(true);
        if (!idIsNodeName) {
            problems.add(where + "the node id must come from spec.nodeName");
        }
        if (!env.containsKey("NODE_IP") || !env.get("NODE_IP").startsWith("fieldRef:status.")) {
            problems.add(where + "NODE_IP (the address the agent advertises) must come from the downward API");
        }
        return problems;
    }

    /**
     * The agent credentials the servers read are the files of the kustomization's Secrets, mounted
     * from them; each server gets its own pair (controller/ or node/ of hack/agent-credentials.sh),
     * and no node pod mounts a Secret that holds the controller's pair (with it, a node could call
     * every other node's agent).
     */
    List<String> credentials() {
        List<String> problems = new ArrayList<>();
        Map<String, List<String>> secrets = new HashMap<>();
        for (Map<String, Object> generator : Tree.maps(manifests.kustomization(), "secretGenerator")) {
            List<String> files = Tree.strings(generator, "files").stream().map(file -> file.replaceFirst("^[^=]*=", "")).toList();
            secrets.put(Tree.string(generator, "name"), files);
            if (files.stream().anyMatch(file -> Path.of(file).getFileName().toString().equals("ca.key"))) {
                problems.add(Manifests.KUSTOMIZATION + ": the CA's key must stay offline, not go into the Secret");
            }
        }
        for (PodTemplate pod : manifests.pods()) {
            Container server = pod.driver();
            String pair = pod.owner().kind().equals("Deployment") ? "controller" : "node";
            for (String flag : List.of("agent-token-file", "agent-tls-cert", "agent-tls-key", "agent-tls-ca")) {
                String where = pod.owner().describe() + ": --" + flag + " ";
                Optional<String> path = server.flagValue(flag);
                if (path.isEmpty()) {
                    problems.add(where + "is not given");
                    continue;
                }
                Optional<VolumePath> file = pod.resolve(server, path.get());
                Optional<String> secretName = file.flatMap(f -> pod.volume(f.volume())).map(v -> Tree.string(v, "secret", "secretName"));
                List<String> files = secretName.map(secrets::get).orElse(null);
                Optional<String> source = files == null ? Optional.empty()
                        : files.stream().filter(f -> Path.of(f).getFileName().toString().equals(file.get().relative())).findFirst();
                if (files == null) {
                    problems.add(where + path.get() + " is not in a volume of a Secret the kustomization makes " + secrets.keySet());
                } else if (source.isEmpty()) {
                    problems.add(where + path.get() + ": Secret " + secretName.get() + " has no key " + file.get().relative());
                } else if (flag.equals("agent-tls-cert") || flag.equals("agent-tls-key")) {
                    if (!source.get().contains("/" + pair + "/")) {
                        problems.add(where + path.get() + " is " + source.get() + ", not the " + pair + " pair's");
                    }
                }
            }
            if (pair.equals("node")) {
                for (Map<String, Object> volume : Tree.maps(pod.spec(), "volumes")) {
                    List<String> files = secrets.getOrDefault(Tree.string(volume, "secret", "secretName"), List.of());
                    if (files.stream().anyMatch(file -> file.contains("/controller/"))) {
                        problems.add(pod.owner().describe() + ": volume " + volume.get("name")
                                + " holds the controller's pair: a node must not hold what calls other nodes' agents");
                    }
                }
            }
        }
        return problems;
    }

    /**
     * Per-node identity on the agent channel: node-server presents a short-lived projected token for
     * the audience the controller expects; controller-server checks it (the keys read from the
     * apiserver, the node's ServiceAccount only), may read the keys and the issuer (RBAC), and
     * sends no token of its own to the nodes (its client certificate proves it; a token every node
     * receives would be worth something to each of them).
     */
    List<String> identity() {
        List<String> problems = new ArrayList<>();
        PodTemplate controller = manifests.pod("Deployment", "strata-controller");
        PodTemplate node = manifests.pod("DaemonSet", "strata-node");
        Container controllerServer = controller.driver();
        Container nodeServer = node.driver();
        String where = controller.owner().describe() + ": ";
        if (!controllerServer.flagValue("agent-identity-keys").equals(Optional.of("kubernetes"))) {
            problems.add(where + "--agent-identity-keys=kubernetes is not given");
        }
        List<String> peers = List.of(node.namespace() + "/" + node.serviceAccount());
        if (!controllerServer.flagValue("agent-identity-callers").map(callers -> List.of(callers.split(","))).equals(Optional.of(peers))) {
            problems.add(where + "--agent-identity-callers must name node-server's ServiceAccount " + peers);
        }
        if (controllerServer.flagValue("agent-identity-token-file").isPresent()) {
            problems.add(where + "--agent-identity-token-file: a token sent to every node would be worth something to each of them");
        }
        boolean mayRead = manifests.ofKind("ClusterRoleBinding").stream().anyMatch(binding ->
                Tree.maps(binding.body(), "subjects").stream().anyMatch(subject -> controller.serviceAccount().equals(subject.get("name"))
                        && controller.namespace().equals(subject.get("namespace")))
                && Tree.maps(manifests.one("ClusterRole", Tree.string(binding.body(), "roleRef", "name")).body(), "rules").stream()
                        .anyMatch(rule -> Tree.strings(rule, "nonResourceURLs").containsAll(List.of("/openid/v1/jwks",
                                "/.well-known/openid-configuration")) && Tree.strings(rule, "verbs").contains("get")));
        if (!mayRead) {
            problems.add(where + "ServiceAccount " + controller.serviceAccount() + " may not get /openid/v1/jwks and "
                    + "/.well-known/openid-configuration");
        }

        where = node.owner().describe() + ": ";
        String audience = controllerServer.flagValue("agent-identity-audience").orElse("strata.csi.dev");
        Optional<Map<String, Object>> source = nodeServer.flagValue("agent-identity-token-file").flatMap(path -> node.resolve(nodeServer, path))
                .flatMap(file -> projectedToken(node, file));
        if (source.isEmpty() || !audience.equals(Tree.string(source.get(), "audience"))) {
            problems.add(where + "--agent-identity-token-file is not a projected ServiceAccount token for the audience " + audience);
        } else if (!(Tree.at(source.get(), "expirationSeconds") instanceof Number seconds) || seconds.longValue() > 600) {
            problems.add(where + "the identity token must live 600 s (the shortest the apiserver issues): a deleted pod's token "
                    + "registers its node until it expires");
        }
        if (nodeServer.flagValue("agent-identity-keys").isPresent()) {
            problems.add(where + "--agent-identity-keys: over TLS the agent takes calls with the controller's certificate, no token");
        }
        return problems;
    }

    /** The serviceAccountToken source of a projected volume that writes {@code file}. */
    private static Optional<Map<String, Object>> projectedToken(PodTemplate pod, PodTemplate.VolumePath file) {
        return pod.volume(file.volume()).stream()
                .flatMap(volume -> Tree.maps(volume, "projected", "sources").stream())
                .map(projected -> Tree.map(projected, "serviceAccountToken"))
                .filter(token -> token != null && file.relative().equals(Tree.string(token, "path")))
                .findFirst();
    }

    /**
     * StorageClasses: parameters the backends accept (the driver's own check), the filesystem by
     * its current key, expansion allowed (both backends grow volumes), local ones wait for the pod.
     */
    List<String> storageClasses() {
        List<String> problems = new ArrayList<>();
        Set<String> nfs = NfsParameters.STORAGE_CLASS.administrator();
        for (KubeObject storageClass : manifests.ofKind("StorageClass")) {
            Map<String, Object> parameters = Tree.map(storageClass.body(), "parameters");
            boolean isNfs = parameters.containsKey("server");
            Map<String, String> values = new TreeMap<>();
            parameters.forEach((key, value) -> values.put(key, String.valueOf(value)));
            (isNfs ? NfsParameters.STORAGE_CLASS : LocalParameters.STORAGE_CLASS).problem(values)
                    .ifPresent(problem -> problems.add(storageClass.describe() + ": " + problem));
            values.keySet().stream()
                    .filter(key -> KubernetesKeys.Request.CREATE_VOLUME.fromKubernetes(key) && !key.startsWith(KubernetesKeys.PREFIX))
                    .forEach(key -> problems.add(storageClass.describe() + ": " + key + " is a deprecated key (the filesystem is "
                            + KubernetesKeys.FS_TYPE + ")"));
            if (!Boolean.TRUE.equals(Tree.at(storageClass.body(), "allowVolumeExpansion"))) {
                problems.add(storageClass.describe() + ": allowVolumeExpansion must be true, both backends grow volumes");
            }
            if (!isNfs && !"WaitForFirstConsumer".equals(Tree.string(storageClass.body(), "volumeBindingMode"))) {
                problems.add(storageClass.describe() + ": a local volume must wait for its pod's node (WaitForFirstConsumer)");
            }
            if (isNfs && !parameters.keySet().equals(nfs)) {
                problems.add(storageClass.describe() + ": an NFS class gives all of " + nfs);
            }
        }
        return problems;
    }

    /** Images name a release, never a moving tag. */
    List<String> imagesPinned() {
        List<String> problems = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            for (Container container : pod.sidecars()) {
                if (!container.imageTag().matches("v\\d+\\.\\d+\\.\\d+")) {
                    problems.add(pod.owner().describe() + ": " + container.name() + " image " + container.image() + " is not pinned to a release");
                }
            }
        }
        for (Map<String, Object> image : Tree.maps(manifests.kustomization(), "images")) {
            String tag = Tree.string(image, "newTag");
            if (tag == null || tag.equals("latest")) {
                problems.add(Manifests.KUSTOMIZATION + ": image " + image.get("name") + " has no release tag");
            }
        }
        return problems;
    }
}
