package dev.strata.csi.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.github.dockerjava.api.model.AccessMode;
import com.github.dockerjava.api.model.Bind;
import com.github.dockerjava.api.model.Capability;
import com.github.dockerjava.api.model.PropagationMode;
import com.nimbusds.jwt.JWTClaimsSet;
import com.nimbusds.jwt.SignedJWT;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestApiServer;
import dev.strata.csi.testing.TestIssuer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The mapping of deploy/'s pods onto Docker ({@link Kubelet}), without Docker: what the shipped
 * manifests become, and that a manifest the mapping does not understand, or a flag the program
 * refuses, fails loudly.
 */
@Tag("root")
class KubeletTest {

    static final TestIssuer ISSUER = new TestIssuer("kubelet-test-key");

    @TempDir
    Path dir;

    Kubelet kubelet;

    @BeforeEach
    void requireRoot() {
        Root.require(); // kubelet's directory is made a shared mount
    }

    @AfterEach
    void close() throws Exception {
        if (kubelet != null) {
            kubelet.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir), "mounts left behind");
    }

    Kubelet kubelet(Consumer<Manifests> edit) throws Exception {
        Path credentials = Files.createDirectories(dir.resolve("credentials"));
        for (String file : List.of("token", "ca.crt", "ca.key", "controller/tls.crt", "controller/tls.key", "node/tls.crt", "node/tls.key")) {
            Files.createDirectories(credentials.resolve(file).getParent());
            Files.writeString(credentials.resolve(file), "content of " + file);
        }
        Path ca = Files.writeString(dir.resolve("cluster-ca.crt"), "the cluster CA");
        Files.createDirectories(dir.resolve("node/var/lib/kubelet/plugins_registry"));
        Manifests manifests = ManifestsTest.manifests();
        edit.accept(manifests);
        kubelet = new Kubelet(new Kubelet.Site(dir.resolve("node"), "node-1", "10.1.2.3", "10.1.2.4", 6443, ca, ISSUER,
                Map.of("strata-controller-credentials", credentials, "strata-node-credentials", credentials)), manifests);
        return kubelet;
    }

    static JWTClaimsSet claims(Path token) throws Exception {
        return SignedJWT.parse(Files.readString(token)).getJWTClaimsSet();
    }

    @Test
    void theNodePluginRunsAsTheDaemonSetSays() throws Exception {
        DockerContainer node = kubelet(manifests -> {}).prepare("DaemonSet", "strata-node");

        assertTrue(node.args().contains("--node-id=node-1"), "$(NODE_ID) expanded to spec.nodeName: " + node.args());
        assertEquals("/opt/strata/node-server.jar", node.args().getFirst());
        assertEquals("10.1.2.3", node.env().get("NODE_IP"), "status.hostIP");
        assertEquals("10.1.2.4", node.env().get("KUBERNETES_SERVICE_HOST"));
        assertEquals("6443", node.env().get("KUBERNETES_SERVICE_PORT"));
        assertTrue(node.hostNetwork());
        assertTrue(node.resolvesServices(), "ClusterFirstWithHostNet resolves Service names");

        Bind kubeletDir = bindAt(node, "/var/lib/kubelet");
        assertEquals(dir.resolve("node/var/lib/kubelet").toString(), kubeletDir.getPath());
        assertEquals(PropagationMode.RSHARED, kubeletDir.getPropagationMode());
        assertTrue(SystemState.run("findmnt", "--noheadings", "--output", "PROPAGATION", "--mountpoint", kubeletDir.getPath())
                .contains("shared"), "kubelet's directory is a shared mount, so mounts reach the host");
        assertEquals("/dev", bindAt(node, "/dev").getPath(), "the host's devices");
        assertEquals("/sys/fs/cgroup", bindAt(node, "/host/sys/fs/cgroup").getPath(), "the host's cgroup hierarchies");
        assertEquals(dir.resolve("node/var/lib/strata/pool"), node.onHost(node.flag("pool-dir").orElseThrow()));
        assertTrue(Files.isDirectory(node.onHost("/var/lib/strata/pool")), "DirectoryOrCreate");

        // privileged: true, short of --privileged
        assertTrue(node.capAdd().contains(Capability.ALL));
        assertEquals(List.of("a *:* rwm"), node.deviceCgroupRules());
        assertTrue(node.securityOpts().contains("seccomp=unconfined"));
        assertFalse(node.readOnlyRoot());
        assertEquals(320L << 20, node.memoryBytes().orElseThrow(), "resources.limits.memory");

        // Secret: the generator's files with defaultMode 0400, the node pair's; ca.key stays out of it.
        Path agent = node.onHost("/etc/strata/agent");
        assertEquals(AccessMode.ro, bindAt(node, "/etc/strata/agent").getAccessMode());
        assertEquals("content of token", Files.readString(agent.resolve("token")));
        assertEquals("content of node/tls.key", Files.readString(agent.resolve("tls.key")));
        assertEquals("r--------", PosixFilePermissions.toString(Files.getPosixFilePermissions(agent.resolve("tls.key"))));
        assertFalse(Files.exists(agent.resolve("ca.key")));
        assertTrue(Files.isSymbolicLink(agent.resolve("token")), "kubelet's layout: files through ..data");

        // Projected tokens: audience and lifetime as the manifest asks, the pod's node and ServiceAccount.
        JWTClaimsSet identity = claims(node.onHost("/var/run/secrets/strata/identity/token"));
        assertEquals(List.of("strata.csi.dev"), identity.getAudience());
        assertEquals("system:serviceaccount:strata-system:strata-node", identity.getSubject());
        assertEquals(600_000L, identity.getExpirationTime().getTime() - identity.getIssueTime().getTime());
        assertEquals("node-1", ((Map<?, ?>) identity.getJSONObjectClaim("kubernetes.io").get("node")).get("name"));
        assertTrue(node.binds().stream().noneMatch(bind ->
                bind.getVolume().getPath().startsWith("/var/run/secrets/kubernetes.io")),
                "automountServiceAccountToken: false, and node-server reads nothing from the apiserver");
    }

    @Test
    void theControllerRunsAsTheDeploymentSays() throws Exception {
        DockerContainer controller = kubelet(manifests -> {}).prepare("Deployment", "strata-controller");

        assertFalse(controller.hostNetwork());
        assertTrue(controller.serviceNames().contains("strata-controller-agents.strata-system.svc"), controller.serviceNames().toString());
        assertTrue(controller.readOnlyRoot());
        assertEquals(List.of(Capability.ALL), controller.capDrop());
        assertEquals(List.of(), controller.capAdd());
        assertTrue(controller.securityOpts().contains("no-new-privileges"), "allowPrivilegeEscalation: false");
        assertEquals(new DockerContainer.HttpGet(9873, "/healthz"), controller.readiness().orElseThrow(), "the named port resolved");
        assertEquals("content of controller/tls.key", Files.readString(controller.onHost("/etc/strata/agent/tls.key")), "its own pair");
        Path socketDir = controller.onHost("/csi");
        assertTrue(socketDir.toString().contains("/volumes/kubernetes.io~empty-dir/socket-dir"), socketDir.toString());

        // Automounted: the pod does not opt out.
        Path api = controller.onHost("/var/run/secrets/kubernetes.io/serviceaccount");
        assertEquals(AccessMode.ro, bindAt(controller, "/var/run/secrets/kubernetes.io/serviceaccount").getAccessMode());
        assertEquals("strata-system", Files.readString(api.resolve("namespace")));
        JWTClaimsSet token = claims(api.resolve("token"));
        assertEquals("system:serviceaccount:strata-system:strata-controller", token.getSubject());
        assertEquals(List.of(TestApiServer.AUDIENCE), token.getAudience());
    }

    @Test
    void whatTheMappingDoesNotKnowFailsNamingIt() throws Exception {
        kubelet(manifests -> {});
        List<Consumer<Manifests>> edits = List.of(
                m -> securityContext(m).put("seLinuxOptions", Map.of("level", "s0")),
                m -> driver(m).put("envFrom", List.of()),
                m -> spec(m).put("initContainers", List.of()),
                m -> volumes(m).add(Map.of("name", "config", "configMap", Map.of("name", "strata"))),
                m -> spec(m).put("dnsPolicy", "None"));
        List<String> expected = List.of("seLinuxOptions", "envFrom", "initContainers", "configMap", "dnsPolicy None");
        for (int i = 0; i < edits.size(); i++) {
            kubelet.close();
            Consumer<Manifests> edit = edits.get(i);
            Consumer<Manifests> withMount = i == 3 ? edit.andThen(m -> mounts(m).add(Map.of("name", "config", "mountPath", "/c"))) : edit;
            Kubelet broken = kubelet(withMount);
            AssertionError error = assertThrows(AssertionError.class, () -> broken.prepare("DaemonSet", "strata-node"));
            assertTrue(error.getMessage().contains(expected.get(i)), error.getMessage());
        }
    }

    @Test
    void aFlagTheProgramRefusesFailsTheRun() throws Exception {
        DockerContainer node = kubelet(m -> args(m).add("--no-such-flag=1")).prepare("DaemonSet", "strata-node");
        assertTrue(node.args().contains("--no-such-flag=1"), "the manifest's args, as they are");

        ServerProgram.Run run = ServerProgram.of(new Container(Map.of("args", node.args()))).orElseThrow()
                .parse(node.args().subList(1, node.args().size()));
        assertNotEquals(0, run.exitCode(), "node-server must refuse the flag at start");
        assertTrue(run.stderr().contains("no-such-flag"), "and say which: " + run.stderr());
    }

    private static Bind bindAt(DockerContainer container, String path) {
        return container.binds().stream().filter(bind -> bind.getVolume().getPath().equals(path)).findFirst()
                .orElseThrow(() -> new AssertionError("no bind at " + path + ": " + container.binds()));
    }

    private static Map<String, Object> spec(Manifests manifests) {
        return manifests.pod("DaemonSet", "strata-node").spec();
    }

    private static Map<String, Object> driver(Manifests manifests) {
        return manifests.pod("DaemonSet", "strata-node").driver().body();
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> securityContext(Manifests manifests) {
        return (Map<String, Object>) driver(manifests).get("securityContext");
    }

    @SuppressWarnings("unchecked")
    private static List<Object> volumes(Manifests manifests) {
        return (List<Object>) spec(manifests).get("volumes");
    }

    @SuppressWarnings("unchecked")
    private static List<Object> mounts(Manifests manifests) {
        return (List<Object>) driver(manifests).get("volumeMounts");
    }

    @SuppressWarnings("unchecked")
    private static List<Object> args(Manifests manifests) {
        return (List<Object>) driver(manifests).get("args");
    }
}
