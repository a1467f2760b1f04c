package dev.strata.csi.deploy;

import com.github.dockerjava.api.model.AccessMode;
import com.github.dockerjava.api.model.Bind;
import com.github.dockerjava.api.model.Capability;
import com.github.dockerjava.api.model.PropagationMode;
import com.github.dockerjava.api.model.SELContext;
import com.github.dockerjava.api.model.Volume;
import dev.strata.csi.testing.SecretVolume;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestApiServer;
import dev.strata.csi.testing.TestIssuer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A TEST stand-in for kubelet's part in starting our server container of a pod of deploy/, on
 * Docker: it reads the pod template and lays out what kubelet would on a node whose filesystem is
 * {@link Site#root()}, and says how Docker is to run the container ({@link DockerContainer}).
 *
 * <ul>
 *   <li>hostPath volumes are directories below the root (the host's /dev itself, as devices cannot
 *   be imitated); emptyDir volumes are directories where kubelet keeps them (medium Memory: a tmpfs).</li>
 *   <li>Secret volumes hold the files kustomization.yaml's secretGenerator puts in the Secret, read
 *   from the directory the test gives for it; projected volumes hold ServiceAccount tokens the
 *   {@link TestIssuer} signs (audience and lifetime as the manifest asks, the node and pod claims
 *   kube-apiserver adds), the cluster CA (kube-root-ca.crt) and downward-API files. Both with
 *   kubelet's layout (files through a ..data link) and defaultMode.</li>
 *   <li>A pod that does not opt out gets the automounted ServiceAccount volume, as the
 *   ServiceAccount admission plugin adds it; every container gets KUBERNETES_SERVICE_HOST and
 *   _PORT, naming the apiserver stand-in.</li>
 *   <li>Downward-API env values are the pod's; $(VAR) in args and env expands as kubelet expands it.</li>
 *   <li>securityContext: runAsUser/runAsGroup, readOnlyRootFilesystem, capabilities,
 *   allowPrivilegeEscalation: false (no-new-privileges) map to Docker's options of the same
 *   meaning. privileged: true cannot (this sandbox refuses --privileged): it becomes every
 *   capability the sandbox has, every device, no seccomp or AppArmor profile; what stays short of
 *   Kubernetes' privileged is a read-only /sys, the masked /proc paths, and the capabilities the
 *   sandbox withholds (CAP_SYS_RESOURCE).</li>
 *   <li>Mount propagation Bidirectional is rshared, with the volume's directory made a shared
 *   mount as kubelet makes its own; HostToContainer is rslave.</li>
 *   <li>Services that select the pod: their DNS names resolve to the container (a Docker network
 *   alias, or /etc/hosts on the host network under ClusterFirstWithHostNet).</li>
 * </ul>
 * Anything else in the manifest fails {@link #prepare}: a manifest change is then mapped here, or
 * the test says why not, and is never silently left out. Sidecar containers are not run: the
 * tests play them on the CSI socket. Not imitated, on purpose: scheduling (affinity, tolerations,
 * priority, resource requests), liveness and startup probes (kubelet would restart the container;
 * the test never does unasked), container ports (they declare, they do not open anything), and
 * renewal of projected tokens (a run lasts minutes, the tokens an hour).
 */
public final class Kubelet implements AutoCloseable {

    /**
     * What the node and the cluster give a pod here.
     *
     * @param root          the node's filesystem: hostPath volumes and kubelet's directory are below it
     * @param nodeName      spec.nodeName, and the node claim of the pods' tokens
     * @param hostIp        status.hostIP: the node's address, as the containers reach it
     * @param apiServerHost the apiserver stand-in's address, as the containers reach it
     * @param apiServerPort its port
     * @param clusterCa     the CA of its certificate (kube-root-ca.crt's ca.crt)
     * @param issuer        the key the cluster signs ServiceAccount tokens with
     * @param secrets       by Secret name, the directory holding the files its generator names (as deploy/credentials)
     */
    public record Site(Path root, String nodeName, String hostIp, String apiServerHost, int apiServerPort, Path clusterCa,
            TestIssuer issuer, Map<String, Path> secrets) {}

    /** Where a pod's ServiceAccount token, CA and namespace are mounted when the pod does not opt out. */
    static final String SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";
    /** The ConfigMap kube-controller-manager publishes in every namespace: the cluster CA. */
    static final String ROOT_CA = "kube-root-ca.crt";
    /** The token of the automounted volume: the apiserver's audience, 3607 s as the admission plugin asks. */
    private static final long AUTOMOUNT_SECONDS = 3607;
    private static final String KUBELET_DIR = "var/lib/kubelet";
    /**
     * hostPaths that are this machine's own: devices and the cgroup hierarchies (where node-server
     * writes volumes' IO limits) cannot be imitated in a directory.
     */
    private static final List<String> REAL_HOST_PATHS = List.of("/dev", "/sys/fs/cgroup");

    private static final Set<String> POD_FIELDS = Set.of("serviceAccountName", "automountServiceAccountToken", "hostNetwork",
            "dnsPolicy", "containers", "volumes", "securityContext",
            // Scheduling and eviction: where and whether the pod runs, not how.
            "priorityClassName", "affinity", "tolerations", "nodeSelector", "terminationGracePeriodSeconds");
    private static final Set<String> CONTAINER_FIELDS = Set.of("name", "image", "imagePullPolicy", "command", "args", "env",
            "volumeMounts", "securityContext", "resources", "readinessProbe",
            // Not imitated (see the class comment).
            "ports", "livenessProbe", "startupProbe");
    private static final Set<String> SECURITY_FIELDS = Set.of("privileged", "allowPrivilegeEscalation", "readOnlyRootFilesystem",
            "capabilities", "runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile");
    private static final Set<String> POD_SECURITY_FIELDS = Set.of("runAsUser", "runAsGroup", "runAsNonRoot");
    private static final Set<String> PROBE_FIELDS = Set.of("httpGet", "initialDelaySeconds", "periodSeconds", "timeoutSeconds",
            "failureThreshold", "successThreshold");
    private static final Pattern REFERENCE = Pattern.compile("\\$\\(([A-Za-z_][A-Za-z0-9_.-]*)\\)|\\$\\$");
    /** Linux capabilities by number, as /proc/self/status counts them. */
    private static final List<String> CAPABILITIES = List.of("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID",
            "KILL", "SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
            "IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT",
            "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
            "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ");

    private final Site site;
    private final Manifests manifests;
    private final List<Path> sharedMounts = new ArrayList<>();

    public Kubelet(Site site, Path deployDir) throws IOException {
        this(site, Manifests.load(deployDir));
    }

    /** On manifests a test may have edited. */
    Kubelet(Site site, Manifests manifests) {
        this.site = site;
        this.manifests = manifests;
    }

    /** The directory deploy/'s tests read (the deploy.dir property). */
    public static Path deployDir() {
        return Manifests.defaultDir();
    }

    /** kubelet's directory on the node (its host path below the root). */
    public Path kubeletDir() {
        return site.root().resolve(KUBELET_DIR);
    }

    /**
     * Lays out the volumes of a new pod of workload {@code kind}/{@code name} and says how to run
     * its server container. Fails, naming the field, on anything of the pod it does not map.
     */
    public DockerContainer prepare(String kind, String name) throws IOException, InterruptedException {
        PodTemplate template = manifests.pod(kind, name);
        Pod pod = new Pod(template, name + "-" + HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextInt()).substring(3),
                UUID.randomUUID().toString());
        String where = template.owner().describe();
        only(template.spec(), POD_FIELDS, where + ": spec");
        only(Tree.map(template.spec(), "securityContext"), POD_SECURITY_FIELDS, where + ": spec.securityContext");
        Container container = template.driver();
        String at = where + ": container " + container.name();
        only(container.body(), CONTAINER_FIELDS, at);

        boolean hostNetwork = Boolean.TRUE.equals(template.spec().get("hostNetwork"));
        Map<String, String> env = new LinkedHashMap<>();
        env.put("KUBERNETES_SERVICE_HOST", site.apiServerHost());
        env.put("KUBERNETES_SERVICE_PORT", Integer.toString(site.apiServerPort()));
        env.put("KUBERNETES_SERVICE_PORT_HTTPS", Integer.toString(site.apiServerPort()));
        for (Map<String, Object> variable : Tree.maps(container.body(), "env")) {
            String variableName = Tree.string(variable, "name");
            only(variable, Set.of("name", "value", "valueFrom"), at + ": env " + variableName);
            if (variable.containsKey("valueFrom")) {
                only(Tree.map(variable, "valueFrom"), Set.of("fieldRef"), at + ": env " + variableName + ".valueFrom");
                only(Tree.map(variable, "valueFrom", "fieldRef"), Set.of("fieldPath", "apiVersion"), at + ": env " + variableName);
                env.put(variableName, field(pod, Tree.string(variable, "valueFrom", "fieldRef", "fieldPath"), hostNetwork, at));
            } else {
                env.put(variableName, expand(String.valueOf(variable.getOrDefault("value", "")), env));
            }
        }

        List<Bind> binds = new ArrayList<>();
        Map<String, String> tmpfs = new LinkedHashMap<>();
        List<Map<String, Object>> mounts = new ArrayList<>(Tree.maps(container.body(), "volumeMounts"));
        if (automounts(template) && mounts.stream().noneMatch(mount -> SERVICE_ACCOUNT_DIR.equals(mount.get("mountPath")))) {
            mounts.add(Map.of("name", "kube-api-access", "mountPath", SERVICE_ACCOUNT_DIR, "readOnly", true));
        }
        for (Map<String, Object> mount : mounts) {
            String volumeName = Tree.string(mount, "name");
            String path = Tree.string(mount, "mountPath");
            only(mount, Set.of("name", "mountPath", "readOnly", "mountPropagation"), at + ": volumeMount " + volumeName);
            Map<String, Object> volume = volumeName.equals("kube-api-access") && template.volume(volumeName).isEmpty()
                    ? automountedVolume() : template.volume(volumeName)
                            .orElseThrow(() -> new AssertionError(at + ": volumeMount " + volumeName + " names no volume of the pod"));
            String propagation = Tree.string(mount, "mountPropagation");
            if (Tree.map(volume, "emptyDir").containsKey("medium")) {
                if (!"Memory".equals(Tree.string(volume, "emptyDir", "medium"))) {
                    throw new AssertionError(at + ": emptyDir " + volumeName + " has medium " + Tree.string(volume, "emptyDir", "medium")
                            + ", which the test does not map to Docker");
                }
                tmpfs.put(path, "rw");
                continue;
            }
            Path source = source(pod, volume, at);
            PropagationMode mode = switch (propagation == null ? "None" : propagation) {
                case "None" -> PropagationMode.DEFAULT_MODE;
                case "HostToContainer" -> PropagationMode.RSLAVE;
                case "Bidirectional" -> {
                    shared(source);
                    yield PropagationMode.RSHARED;
                }
                default -> throw new AssertionError(at + ": volumeMount " + volumeName + " has mountPropagation " + propagation
                        + ", which Kubernetes does not know");
            };
            boolean readOnly = Boolean.TRUE.equals(mount.get("readOnly"));
            binds.add(new Bind(source.toString(), new Volume(path), readOnly ? AccessMode.ro : AccessMode.rw, SELContext.none, null, mode));
        }

        Map<String, Object> security = Tree.map(container.body(), "securityContext");
        only(security, SECURITY_FIELDS, at + ": securityContext");
        List<Capability> capAdd = new ArrayList<>();
        List<Capability> capDrop = new ArrayList<>();
        List<String> securityOpts = new ArrayList<>();
        List<String> deviceRules = new ArrayList<>();
        only(Tree.map(security, "capabilities"), Set.of("add", "drop"), at + ": securityContext.capabilities");
        Tree.strings(security, "capabilities", "add").forEach(capability -> capAdd.add(capability(capability, at)));
        Tree.strings(security, "capabilities", "drop").forEach(capability -> capDrop.add(capability(capability, at)));
        if (Boolean.TRUE.equals(security.get("privileged"))) {
            capAdd.add(Capability.ALL);
            capDrop.addAll(withheldBySandbox());
            securityOpts.addAll(List.of("seccomp=unconfined", "apparmor=unconfined"));
            deviceRules.add("a *:* rwm");
        }
        if (Boolean.FALSE.equals(security.get("allowPrivilegeEscalation"))) {
            securityOpts.add("no-new-privileges");
        }
        String seccomp = Tree.string(security, "seccompProfile", "type");
        if (seccomp != null && !seccomp.equals("RuntimeDefault")) {
            if (!seccomp.equals("Unconfined")) {
                throw new AssertionError(at + ": seccompProfile " + seccomp + " is not mapped to Docker by the test");
            }
            securityOpts.add("seccomp=unconfined");
        }
        Optional<String> user = user(container.body(), template.spec(), at);

        Map<String, Object> resources = Tree.map(container.body(), "resources");
        only(resources, Set.of("requests", "limits"), at + ": resources");
        only(Tree.map(resources, "limits"), Set.of("memory", "cpu"), at + ": resources.limits");
        only(Tree.map(resources, "requests"), Set.of("memory", "cpu"), at + ": resources.requests");
        String memory = Tree.string(resources, "limits", "memory");
        String cpu = Tree.string(resources, "limits", "cpu");

        List<String> args = Tree.strings(container.body(), "args").stream().map(arg -> expand(arg, env)).toList();
        List<String> command = Tree.strings(container.body(), "command").stream().map(arg -> expand(arg, env)).toList();
        return new DockerContainer(pod.name(), container.name(), hostNetwork, serviceNames(template, container, at),
                resolvesServices(template, hostNetwork, where), command, args, env, binds, tmpfs, user,
                Boolean.TRUE.equals(security.get("readOnlyRootFilesystem")), capAdd, capDrop, securityOpts, deviceRules,
                memory == null ? OptionalLong.empty() : OptionalLong.of(quantity(memory, at)),
                cpu == null ? OptionalLong.empty() : OptionalLong.of(Math.round(cpuQuantity(cpu, at) * 1e9)),
                readiness(container, at));
    }

    /** A pod being started: its name, uid and the downward API's fields. */
    private record Pod(PodTemplate template, String name, String uid) {

        String field(String path, String at) {
            return switch (path) {
                case "metadata.name" -> name;
                case "metadata.namespace" -> template.namespace();
                case "metadata.uid" -> uid;
                case "spec.serviceAccountName" -> template.serviceAccount();
                default -> throw new AssertionError(at + ": the downward-API field " + path + " is not known to the test");
            };
        }
    }

    private String field(Pod pod, String path, boolean hostNetwork, String at) {
        return switch (path) {
            case "spec.nodeName" -> site.nodeName();
            case "status.hostIP" -> site.hostIp();
            // A pod on the host network has the node's address; a pod's own is Docker's to choose, after this.
            case "status.podIP" -> {
                if (!hostNetwork) {
                    throw new AssertionError(at + ": status.podIP of a pod on the pod network is not mapped by the test");
                }
                yield site.hostIp();
            }
            default -> pod.field(path, at);
        };
    }

    /** The directory on this machine that holds {@code volume}'s files, laid out as kubelet lays it out. */
    private Path source(Pod pod, Map<String, Object> volume, String at) throws IOException {
        String name = Tree.string(volume, "name");
        Set<String> types = new TreeSet<>(volume.keySet());
        types.remove("name");
        Path volumes = kubeletDir().resolve("pods").resolve(pod.uid()).resolve("volumes");
        String type = types.size() == 1 ? types.iterator().next() : String.valueOf(types);
        switch (type) {
            case "hostPath" -> {
                only(Tree.map(volume, "hostPath"), Set.of("path", "type"), at + ": volume " + name);
                String path = Tree.string(volume, "hostPath", "path");
                if (REAL_HOST_PATHS.contains(path)) {
                    return Path.of(path);
                }
                Path onNode = site.root().resolve(path.replaceFirst("^/+", ""));
                String hostPathType = Tree.string(volume, "hostPath", "type");
                switch (hostPathType == null ? "" : hostPathType) {
                    case "DirectoryOrCreate" -> Files.createDirectories(onNode);
                    case "Directory", "" -> {
                        if (!Files.isDirectory(onNode)) {
                            throw new AssertionError(at + ": hostPath " + path + " (" + hostPathType + ") is no directory on the node");
                        }
                    }
                    default -> throw new AssertionError(at + ": hostPath type " + hostPathType + " is not mapped by the test");
                }
                return onNode;
            }
            case "emptyDir" -> {
                only(Tree.map(volume, "emptyDir"), Set.of(), at + ": emptyDir " + name);
                return Files.createDirectories(volumes.resolve("kubernetes.io~empty-dir").resolve(name));
            }
            case "secret" -> {
                only(Tree.map(volume, "secret"), Set.of("secretName", "defaultMode"), at + ": secret volume " + name);
                String secret = Tree.string(volume, "secret", "secretName");
                Map<String, byte[]> files = new LinkedHashMap<>();
                secretData(secret, at).forEach((key, file) -> files.put(key, read(file)));
                return publish(volumes.resolve("kubernetes.io~secret").resolve(name), files, mode(volume.get("secret"), at));
            }
            case "projected" -> {
                only(Tree.map(volume, "projected"), Set.of("sources", "defaultMode"), at + ": projected volume " + name);
                Map<String, byte[]> files = new LinkedHashMap<>();
                for (Map<String, Object> projection : Tree.maps(volume, "projected", "sources")) {
                    project(pod, projection, files, at + ": projected volume " + name);
                }
                return publish(volumes.resolve("kubernetes.io~projected").resolve(name), files, mode(volume.get("projected"), at));
            }
            default -> throw new AssertionError(at + ": volume " + name + " of type " + type + " is not mapped by the test");
        }
    }

    private void project(Pod pod, Map<String, Object> projection, Map<String, byte[]> files, String at) throws IOException {
        if (projection.size() != 1) {
            throw new AssertionError(at + ": a source must be of one kind, got " + projection.keySet());
        }
        String kind = projection.keySet().iterator().next();
        Map<String, Object> source = Tree.map(projection, kind);
        switch (kind) {
            case "serviceAccountToken" -> {
                only(source, Set.of("audience", "expirationSeconds", "path"), at + ": serviceAccountToken");
                String audience = source.containsKey("audience") ? Tree.string(source, "audience") : TestApiServer.AUDIENCE;
                long seconds = source.containsKey("expirationSeconds") ? ((Number) source.get("expirationSeconds")).longValue() : 3600;
                files.put(Tree.string(source, "path"), token(pod, audience, seconds));
            }
            case "configMap" -> {
                only(source, Set.of("name", "items"), at + ": configMap");
                if (!ROOT_CA.equals(Tree.string(source, "name"))) {
                    throw new AssertionError(at + ": ConfigMap " + Tree.string(source, "name") + " is not provided by the test (only "
                            + ROOT_CA + ", which the cluster publishes in every namespace)");
                }
                Map<String, byte[]> data = Map.of("ca.crt", read(site.clusterCa()));
                List<Map<String, Object>> items = Tree.maps(source, "items");
                if (items.isEmpty()) {
                    files.putAll(data);
                }
                for (Map<String, Object> item : items) {
                    only(item, Set.of("key", "path"), at + ": configMap item");
                    byte[] value = data.get(Tree.string(item, "key"));
                    if (value == null) {
                        throw new AssertionError(at + ": " + ROOT_CA + " has no key " + Tree.string(item, "key"));
                    }
                    files.put(Tree.string(item, "path"), value);
                }
            }
            case "downwardAPI" -> {
                only(source, Set.of("items"), at + ": downwardAPI");
                for (Map<String, Object> item : Tree.maps(source, "items")) {
                    only(item, Set.of("path", "fieldRef"), at + ": downwardAPI item");
                    files.put(Tree.string(item, "path"), field(pod, Tree.string(item, "fieldRef", "fieldPath"), false, at)
                            .getBytes(java.nio.charset.StandardCharsets.UTF_8));
                }
            }
            default -> throw new AssertionError(at + ": a projected source of kind " + kind + " is not mapped by the test");
        }
    }

    /** A token as kube-apiserver issues it for the pod: its ServiceAccount, node and uid, the audience and lifetime asked. */
    private byte[] token(Pod pod, String audience, long seconds) {
        String token = site.issuer().token(new TestIssuer.Claims(TestIssuer.ISSUER, pod.template().namespace(), pod.template().serviceAccount(),
                Optional.of(site.nodeName()), pod.uid(), audience, Instant.now(), Duration.ofSeconds(seconds)));
        return token.getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    }

    /** The files of Secret {@code name} as kustomization.yaml's secretGenerator makes it: key to the file given for it. */
    private Map<String, Path> secretData(String name, String at) {
        Map<String, Object> generator = Tree.maps(manifests.kustomization(), "secretGenerator").stream()
                .filter(candidate -> name.equals(candidate.get("name"))).findFirst()
                .orElseThrow(() -> new AssertionError(at + ": Secret " + name + " is made by no secretGenerator of "
                        + Manifests.KUSTOMIZATION));
        Path dir = site.secrets().get(name);
        if (dir == null) {
            throw new AssertionError(at + ": the test gives no files for Secret " + name);
        }
        Map<String, Path> data = new LinkedHashMap<>();
        for (String file : Tree.strings(generator, "files")) {
            int eq = file.indexOf('=');
            String path = eq < 0 ? file : file.substring(eq + 1);
            String key = eq < 0 ? Path.of(file).getFileName().toString() : file.substring(0, eq);
            // The generator names them below deploy/credentials, as hack/agent-credentials.sh lays them out.
            data.put(key, dir.resolve(Path.of("credentials").relativize(Path.of(path))));
        }
        return data;
    }

    private static byte[] read(Path file) {
        try {
            return Files.readAllBytes(file);
        } catch (IOException e) {
            throw new AssertionError("cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /** Writes {@code files} into {@code dir} as kubelet's atomic writer does, each file of mode {@code mode}. */
    private static Path publish(Path dir, Map<String, byte[]> files, int mode) throws IOException {
        Path staged = Files.createDirectories(dir.resolveSibling(".staged-" + dir.getFileName()));
        for (Map.Entry<String, byte[]> file : files.entrySet()) {
            if (file.getKey().contains("/")) {
                throw new AssertionError("a volume file in a subdirectory (" + file.getKey() + ") is not mapped by the test");
            }
            Files.write(staged.resolve(file.getKey()), file.getValue());
        }
        String version = "..v1";
        SecretVolume.publish(dir, staged, version, List.copyOf(files.keySet()));
        for (String name : files.keySet()) {
            Files.setPosixFilePermissions(dir.resolve(version).resolve(name), permissions(mode));
        }
        try (var listing = Files.list(staged)) {
            for (Path file : listing.toList()) {
                Files.delete(file);
            }
        }
        Files.delete(staged);
        return dir;
    }

    private static int mode(Object volumeSource, String at) {
        Object mode = Tree.at(volumeSource, "defaultMode");
        if (mode == null) {
            return 0644;
        }
        if (!(mode instanceof Integer value)) {
            throw new AssertionError(at + ": defaultMode " + mode + " is not a number");
        }
        return value;
    }

    private static Set<PosixFilePermission> permissions(int mode) {
        Set<PosixFilePermission> permissions = EnumSet.noneOf(PosixFilePermission.class);
        PosixFilePermission[] order = {PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE,
                PosixFilePermission.OTHERS_READ, PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE,
                PosixFilePermission.GROUP_READ, PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE,
                PosixFilePermission.OWNER_READ};
        for (int bit = 0; bit < order.length; bit++) {
            if ((mode & (1 << bit)) != 0) {
                permissions.add(order[bit]);
            }
        }
        return permissions;
    }

    /** Whether the pod gets the automounted ServiceAccount volume: the pod's setting, else its ServiceAccount's, else yes. */
    private boolean automounts(PodTemplate template) {
        Object pod = template.spec().get("automountServiceAccountToken");
        if (pod != null) {
            return Boolean.TRUE.equals(pod);
        }
        Object account = manifests.installed().stream()
                .filter(object -> "ServiceAccount".equals(object.kind()) && template.serviceAccount().equals(object.name())
                        && template.namespace().equals(object.namespace()))
                .findFirst().map(object -> object.body().get("automountServiceAccountToken")).orElse(null);
        return account == null || Boolean.TRUE.equals(account);
    }

    /** The volume the ServiceAccount admission plugin adds (kube-api-access-*). */
    private static Map<String, Object> automountedVolume() {
        return Map.of("name", "kube-api-access", "projected", Map.of("defaultMode", 0644, "sources", List.of(
                Map.of("serviceAccountToken", Map.of("expirationSeconds", (int) AUTOMOUNT_SECONDS, "path", "token")),
                Map.of("configMap", Map.of("name", ROOT_CA, "items", List.of(Map.of("key", "ca.crt", "path", "ca.crt")))),
                Map.of("downwardAPI", Map.of("items", List.of(
                        Map.of("path", "namespace", "fieldRef", Map.of("fieldPath", "metadata.namespace"))))))));
    }

    /** The DNS names of the installed Services selecting the pod; a Service whose port is not its target port fails. */
    private List<String> serviceNames(PodTemplate template, Container container, String at) {
        List<String> names = new ArrayList<>();
        for (KubeObject service : manifests.installed()) {
            Map<String, Object> selector = Tree.map(service.body(), "spec", "selector");
            if (!"Service".equals(service.kind()) || !template.namespace().equals(service.namespace()) || selector.isEmpty()
                    || !template.labels().entrySet().containsAll(selector.entrySet())) {
                continue;
            }
            for (Map<String, Object> port : Tree.maps(service.body(), "spec", "ports")) {
                Object target = port.getOrDefault("targetPort", port.get("port"));
                Integer number = target instanceof Integer value ? value : container.ports().get(String.valueOf(target));
                if (!port.get("port").equals(number)) {
                    throw new AssertionError(at + ": " + service.describe() + " port " + port.get("port") + " goes to "
                            + target + ": a port other than the container's is not mapped by the test");
                }
            }
            String base = service.name() + "." + service.namespace();
            names.addAll(List.of(base + ".svc.cluster.local", base + ".svc", base));
        }
        return names;
    }

    private static boolean resolvesServices(PodTemplate template, boolean hostNetwork, String where) {
        String policy = Tree.string(template.spec(), "dnsPolicy");
        return switch (policy == null ? "ClusterFirst" : policy) {
            case "ClusterFirstWithHostNet" -> true;
            // On the host network ClusterFirst falls back to the node's resolver, as Default does.
            case "ClusterFirst" -> !hostNetwork;
            case "Default" -> {
                if (!hostNetwork) {
                    throw new AssertionError(where + ": dnsPolicy Default on the pod network is not mapped by the test");
                }
                yield false;
            }
            default -> throw new AssertionError(where + ": dnsPolicy " + policy + " is not mapped by the test");
        };
    }

    private static Optional<String> user(Map<String, Object> container, Map<String, Object> pod, String at) {
        Object uid = Tree.at(container, "securityContext", "runAsUser");
        uid = uid != null ? uid : Tree.at(pod, "securityContext", "runAsUser");
        Object gid = Tree.at(container, "securityContext", "runAsGroup");
        gid = gid != null ? gid : Tree.at(pod, "securityContext", "runAsGroup");
        Object nonRoot = Tree.at(container, "securityContext", "runAsNonRoot");
        nonRoot = nonRoot != null ? nonRoot : Tree.at(pod, "securityContext", "runAsNonRoot");
        // The image runs as root: kubelet refuses to start it under runAsNonRoot without another uid.
        if (Boolean.TRUE.equals(nonRoot) && (uid == null || Integer.valueOf(0).equals(uid))) {
            throw new AssertionError(at + ": runAsNonRoot, and the image would run as root: kubelet would not start it");
        }
        if (uid == null) {
            if (gid != null) {
                throw new AssertionError(at + ": runAsGroup without runAsUser is not mapped by the test");
            }
            return Optional.empty();
        }
        return Optional.of(gid == null ? uid.toString() : uid + ":" + gid);
    }

    private static Optional<DockerContainer.HttpGet> readiness(Container container, String at) {
        Map<String, Object> probe = Tree.map(container.body(), "readinessProbe");
        if (probe.isEmpty()) {
            return Optional.empty();
        }
        only(probe, PROBE_FIELDS, at + ": readinessProbe");
        Map<String, Object> get = Tree.map(probe, "httpGet");
        only(get, Set.of("path", "port"), at + ": readinessProbe.httpGet");
        Object port = get.get("port");
        Integer number = port instanceof Integer value ? value : container.ports().get(String.valueOf(port));
        if (number == null) {
            throw new AssertionError(at + ": readinessProbe port " + port + " is no port of the container");
        }
        return Optional.of(new DockerContainer.HttpGet(number, Tree.string(get, "path")));
    }

    private static Capability capability(String name, String at) {
        try {
            return Capability.valueOf(name.replaceFirst("^CAP_", ""));
        } catch (IllegalArgumentException e) {
            throw new AssertionError(at + ": capability " + name + " is not one Docker knows");
        }
    }

    /** The capabilities this machine's bounding set lacks: Docker cannot grant them, privileged or not. */
    private static List<Capability> withheldBySandbox() throws IOException {
        String line = Files.readAllLines(Path.of("/proc/self/status")).stream().filter(l -> l.startsWith("CapBnd:")).findFirst()
                .orElseThrow(() -> new IOException("no CapBnd in /proc/self/status"));
        long bounding = Long.parseUnsignedLong(line.substring("CapBnd:".length()).strip(), 16);
        List<Capability> withheld = new ArrayList<>();
        for (int bit = 0; bit < CAPABILITIES.size(); bit++) {
            if ((bounding & (1L << bit)) == 0) {
                withheld.add(Capability.valueOf(CAPABILITIES.get(bit)));
            }
        }
        return withheld;
    }

    /** Makes {@code dir} a shared mount, as kubelet makes its directory: mounts below it then propagate both ways. */
    private void shared(Path dir) throws IOException {
        try {
            SystemState.run("mount", "--bind", dir.toString(), dir.toString());
            sharedMounts.add(dir);
            SystemState.run("mount", "--make-rshared", dir.toString());
        } catch (IOException e) {
            throw e;
        } catch (Exception e) {
            throw new IOException("cannot make " + dir + " a shared mount: " + e.getMessage(), e);
        }
    }

    /** Fails, naming each, on keys of {@code map} outside {@code known}. */
    static void only(Map<String, Object> map, Set<String> known, String where) {
        Set<String> unknown = new TreeSet<>(map.keySet());
        unknown.removeAll(known);
        if (!unknown.isEmpty()) {
            throw new AssertionError(where + ": " + unknown + " not mapped to Docker by the test (Kubelet): map it there, "
                    + "or say there why it need not be");
        }
    }

    /** $(NAME) replaced by the variable's value when defined, $$ by $, as kubelet expands args and env. */
    static String expand(String value, Map<String, String> env) {
        Matcher matcher = REFERENCE.matcher(value);
        StringBuilder out = new StringBuilder();
        while (matcher.find()) {
            String replacement = matcher.group(1) == null ? "$" : env.getOrDefault(matcher.group(1), matcher.group());
            matcher.appendReplacement(out, Matcher.quoteReplacement(replacement));
        }
        return matcher.appendTail(out).toString();
    }

    /** A Kubernetes quantity of bytes: 320Mi, 1G, 1000. */
    static long quantity(String value, String at) {
        long bytes = Quantities.bytes(value);
        if (bytes < 0) {
            throw new AssertionError(at + ": quantity " + value + " is not understood by the test");
        }
        return bytes;
    }

    /** A CPU quantity: 500m, 2. */
    static double cpuQuantity(String value, String at) {
        if (value.matches("\\d+m")) {
            return Long.parseLong(value.substring(0, value.length() - 1)) / 1000.0;
        }
        if (value.matches("\\d+(\\.\\d+)?")) {
            return Double.parseDouble(value);
        }
        throw new AssertionError(at + ": CPU quantity " + value + " is not understood by the test");
    }

    /** Undoes the shared mounts it made; the files stay for the test's directory to go with. */
    @Override
    public void close() throws Exception {
        for (Path dir : sharedMounts.reversed()) {
            SystemState.run("umount", "--lazy", dir.toString());
        }
        sharedMounts.clear();
    }
}
