package dev.strata.csi.deploy;

import java.io.IOException;
import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Stream;
import org.yaml.snakeyaml.LoaderOptions;
import org.yaml.snakeyaml.Yaml;
import org.yaml.snakeyaml.constructor.SafeConstructor;

/**
 * Every manifest under deploy/ (the kustomization's resources, the examples and the components'
 * resources), freshly parsed: a test that edits the tree to see a check fail changes only its own copy.
 */
final class Manifests {

    static final String KUSTOMIZATION = "kustomization.yaml";
    /** The example alerting rules: a Prometheus rules file, not a Kubernetes object. */
    static final String ALERT_RULES = "monitoring/alerts.yaml";
    /** The kustomize component that lets controller-server mount NFS exports, and its patch. */
    static final String NFS_COMPONENT = "components/nfs-exports";
    /** The kustomize component that adds the VolumeSnapshotClasses (their CRDs are the cluster's). */
    static final String SNAPSHOT_CLASSES_COMPONENT = "components/snapshot-classes";
    /** The kustomize component that runs external-snapshot-metadata beside controller-server, with its Service, CRD, RBAC and certificate. */
    static final String SNAPSHOT_METADATA_COMPONENT = "components/snapshot-metadata";
    /** The kustomization that installs the snapshot CRDs and snapshot-controller on a cluster without them. */
    static final String SNAPSHOT_CONTROLLER = "snapshot-controller/" + KUSTOMIZATION;
    /** Kinds whose pod template the checks look into. */
    private static final Set<String> WORKLOADS = Set.of("Deployment", "DaemonSet", "StatefulSet");

    private final Path dir;
    private final List<KubeObject> objects;
    private final Map<String, Object> kustomization;
    private final Map<String, Object> alertRules;
    private final Map<String, Map<String, Object>> components;
    private final Map<String, Object> snapshotController;
    /** Components applied to this copy ({@link #apply}): their objects' RBAC is in force. */
    private final Set<String> applied = new java.util.HashSet<>();

    private Manifests(Path dir, List<KubeObject> objects, Map<String, Object> kustomization, Map<String, Object> alertRules,
            Map<String, Map<String, Object>> components, Map<String, Object> snapshotController) {
        this.dir = dir;
        this.objects = objects;
        this.kustomization = kustomization;
        this.alertRules = alertRules;
        this.components = components;
        this.snapshotController = snapshotController;
    }

    static Path defaultDir() {
        return Path.of(System.getProperty("deploy.dir", "."));
    }

    static Manifests load(Path dir) throws IOException {
        List<KubeObject> objects = new ArrayList<>();
        Map<String, Object> kustomization = Map.of();
        for (Path file : yamlFiles(dir)) {
            List<Map<String, Object>> documents = parse(file);
            if (file.equals(dir.resolve(KUSTOMIZATION))) {
                kustomization = documents.getFirst();
            } else {
                documents.forEach(document -> objects.add(new KubeObject(file, document)));
            }
        }
        Map<String, Map<String, Object>> components = new TreeMap<>();
        for (String name : componentNames(dir)) {
            Map<String, Object> component = component(dir.resolve(name));
            components.put(name, component);
            for (String resource : Tree.strings(component, "resources")) {
                Path file = dir.resolve(name).resolve(resource);
                if (Files.isRegularFile(file)) { // a missing one is reported by the structure check
                    parse(file).forEach(document -> objects.add(new KubeObject(file, document)));
                }
            }
        }
        return new Manifests(dir, objects, kustomization, parse(dir.resolve(ALERT_RULES)).getFirst(), components,
                parse(dir.resolve(SNAPSHOT_CONTROLLER)).getFirst());
    }

    /** The YAML files of deploy/ and deploy/examples/, not the build's or the tests' own. */
    static List<Path> yamlFiles(Path dir) throws IOException {
        List<Path> files = new ArrayList<>();
        for (Path sub : List.of(dir, dir.resolve("examples"))) {
            try (Stream<Path> listing = Files.list(sub)) {
                listing.filter(path -> path.toString().endsWith(".yaml") || path.toString().endsWith(".yml"))
                        .sorted().forEach(files::add);
            }
        }
        return files;
    }

    /** "components/<name>" for each directory of deploy/components/. */
    private static List<String> componentNames(Path dir) throws IOException {
        try (Stream<Path> listing = Files.list(dir.resolve("components"))) {
            return listing.filter(Files::isDirectory).map(sub -> dir.relativize(sub).toString()).sorted().toList();
        }
    }

    /** A component's kustomization with its patches' documents read in, so that a test can break either. */
    private static Map<String, Object> component(Path dir) throws IOException {
        Map<String, Object> component = parse(dir.resolve(KUSTOMIZATION)).getFirst();
        for (Map<String, Object> patch : Tree.maps(component, "patches")) {
            Path file = dir.resolve(String.valueOf(patch.get("path")));
            if (Files.isRegularFile(file)) {
                patch.put("document", parse(file).getFirst());
            }
        }
        return component;
    }

    /** Every document of one file; a YAML error or a document that is not a mapping throws, naming the file. */
    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> parse(Path file) throws IOException {
        // SafeConstructor: plain maps, lists and scalars only, never arbitrary Java types.
        Yaml yaml = new Yaml(new SafeConstructor(new LoaderOptions()));
        List<Map<String, Object>> documents = new ArrayList<>();
        try (Reader reader = Files.newBufferedReader(file)) {
            for (Object document : yaml.loadAll(reader)) {
                if (document == null) {
                    continue; // an empty document between two '---'
                }
                if (!(document instanceof Map<?, ?>)) {
                    throw new IOException(file + ": a document is not a mapping: " + document);
                }
                documents.add((Map<String, Object>) document);
            }
        } catch (RuntimeException e) {
            throw new IOException(file + ": " + e.getMessage(), e);
        }
        return documents;
    }

    Path dir() {
        return dir;
    }

    /**
     * This copy with {@code component} applied as kustomize would: the containers and volumes its
     * patches add to a workload's pod template appended to it, and its objects in force
     * ({@link #inForce}). A patch may only add containers and volumes here, not change the base's.
     */
    Manifests apply(String component) {
        for (Map<String, Object> patch : Tree.maps(components.get(component), "patches")) {
            Map<String, Object> document = Tree.map(patch, "document");
            PodTemplate pod = pod(String.valueOf(document.get("kind")), Tree.string(document, "metadata", "name"));
            Map<String, Object> added = Tree.map(document, "spec", "template", "spec");
            for (String list : List.of("containers", "volumes")) {
                List<Object> existing = Tree.list(pod.spec(), list);
                for (Map<String, Object> item : Tree.maps(added, list)) {
                    if (existing.stream().anyMatch(old -> old instanceof Map<?, ?> map && item.get("name").equals(map.get("name")))) {
                        throw new AssertionError(component + " patches " + list + " " + item.get("name") + " of the base; apply only adds");
                    }
                    existing.add(item);
                }
            }
        }
        applied.add(component);
        return this;
    }

    /** Whether {@code object} is installed with this copy: the base's, or of a component applied to it. */
    boolean inForce(KubeObject object) {
        Path relative = dir.relativize(object.file());
        return !relative.startsWith("components") || applied.contains(relative.getParent().toString());
    }

    List<KubeObject> all() {
        return objects;
    }

    Map<String, Object> kustomization() {
        return kustomization;
    }

    Map<String, Object> alertRules() {
        return alertRules;
    }

    /** The NFS component's kustomization, with each patch it names parsed into its {@code patches} entry's "document". */
    Map<String, Object> nfsComponent() {
        return components.get(NFS_COMPONENT);
    }

    /** Each component's kustomization (as {@link #nfsComponent}) by its directory below deploy/. */
    Map<String, Map<String, Object>> components() {
        return components;
    }

    /** deploy/snapshot-controller's kustomization. */
    Map<String, Object> snapshotController() {
        return snapshotController;
    }

    /** The objects a component's resources hold (installed only with the component). */
    List<KubeObject> ofComponent(String component) {
        Path componentDir = dir.resolve(component);
        return objects.stream().filter(object -> object.file().getParent().equals(componentDir)).toList();
    }

    /** The objects of deploy/examples/. */
    List<KubeObject> examples() {
        Path examples = dir.resolve("examples");
        return objects.stream().filter(object -> object.file().getParent().equals(examples)).toList();
    }

    List<KubeObject> ofKind(String kind) {
        return objects.stream().filter(object -> kind.equals(object.kind())).toList();
    }

    /** The objects the kustomization installs (not the examples). */
    List<KubeObject> installed() {
        Set<String> resources = Set.copyOf(Tree.strings(kustomization, "resources"));
        return objects.stream().filter(object -> resources.contains(dir.relativize(object.file()).toString())).toList();
    }

    KubeObject one(String kind, String name) {
        return ofKind(kind).stream().filter(object -> name.equals(object.name())).findFirst()
                .orElseThrow(() -> new AssertionError("no " + kind + "/" + name + " in " + dir));
    }

    /** The pod templates of the workloads. */
    List<PodTemplate> pods() {
        return objects.stream().filter(object -> WORKLOADS.contains(object.kind()))
                .map(object -> new PodTemplate(object, Tree.map(object.body(), "spec", "template", "spec")))
                .toList();
    }

    PodTemplate pod(String kind, String name) {
        return pods().stream().filter(pod -> pod.owner().kind().equals(kind) && pod.owner().name().equals(name))
                .findFirst().orElseThrow(() -> new AssertionError("no " + kind + "/" + name));
    }
}
