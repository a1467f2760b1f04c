package dev.strata.csi.e2e;

import csi.v1.ControllerGrpc;
import csi.v1.IdentityGrpc;
import csi.v1.NodeGrpc;
import dev.strata.csi.auth.SigningKeys;
import dev.strata.csi.controller.ControllerServer;
import dev.strata.csi.node.NodeServer;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * controller-server (one, or several replicas) and several node-servers on one machine, each a
 * real process with its own socket, pool and agent port: a multi-node cluster as these tests see
 * it. Every node-server is given the registry address of every controller replica.
 */
public final class Cluster implements AutoCloseable {

    public static final String TOKEN = "e2e-token-0123456789abcdef";

    /** One node-server and what it owns. */
    public record Node(String id, Path socket, Path pool, ServerProcess process, ManagedChannel channel) {
        public NodeGrpc.NodeBlockingStub node() {
            return NodeGrpc.newBlockingStub(channel);
        }
    }

    private final Path dir;
    private final Path tokenFile;
    private final List<String> sharedFlags;
    private final List<Integer> registryPorts = new ArrayList<>();
    private final List<ManagedChannel> channels = new ArrayList<>();
    private final Map<String, Node> nodes = new LinkedHashMap<>();
    private final List<ServerProcess> controllers = new ArrayList<>();
    private final List<ManagedChannel> controllerChannels = new ArrayList<>();

    private final List<String> controllerFlags;
    private final Map<String, String> nodeEnvironment;
    /** How controller-server runs: on the host, or in its pod (only its ServiceAccount files and environment matter). */
    private Launch controllerLaunch = Launch.HOST;

    private Cluster(Path dir, int replicas, List<String> sharedFlags, List<String> controllerFlags, Map<String, String> nodeEnvironment)
            throws IOException {
        this.controllerFlags = List.copyOf(controllerFlags);
        this.nodeEnvironment = Map.copyOf(nodeEnvironment);
        this.dir = Files.createDirectories(dir);
        this.tokenFile = Files.writeString(dir.resolve("agent-token"), TOKEN + "\n");
        this.sharedFlags = List.copyOf(sharedFlags);
        for (int replica = 0; replica < replicas; replica++) {
            registryPorts.add(freePort());
            controllers.add(null);
            controllerChannels.add(null);
        }
    }

    /** Starts the controller and one node-server per id; returns once every agent has registered. */
    public static Cluster start(Path dir, String... nodeIds) throws Exception {
        return start(dir, List.of("--agent-plaintext", "true"), nodeIds);
    }

    /** Starts with these flags given to every server (the agent TLS files, or --agent-plaintext). */
    public static Cluster start(Path dir, List<String> sharedFlags, String... nodeIds) throws Exception {
        return start(dir, sharedFlags, List.of(), Map.of(), nodeIds);
    }

    /** Starts with flags of the controller's own too, and the node-servers run with extra environment variables. */
    public static Cluster start(Path dir, List<String> sharedFlags, List<String> controllerFlags, Map<String, String> nodeEnvironment,
            String... nodeIds) throws Exception {
        return start(dir, 1, sharedFlags, controllerFlags, Launch.HOST, nodeEnvironment, nodeIds);
    }

    /**
     * Starts with the agent channel over TLS as deployed, from what hack/agent-credentials.sh
     * wrote to {@code credentials}: controller-server with the controller pair, the node-servers
     * with the node pair (by environment, so that node-servers started later get it too).
     */
    public static Cluster startWithTls(Path dir, Path credentials, List<String> controllerFlags, Map<String, String> nodeEnvironment,
            String... nodeIds) throws Exception {
        return startWithTls(dir, credentials, Launch.HOST, controllerFlags, nodeEnvironment, nodeIds);
    }

    /** As {@link #startWithTls(Path, Path, List, Map, String...)}, controller-server launched as {@code controllerLaunch} says. */
    public static Cluster startWithTls(Path dir, Path credentials, Launch controllerLaunch, List<String> controllerFlags,
            Map<String, String> nodeEnvironment, String... nodeIds) throws Exception {
        List<String> controller = new ArrayList<>(List.of("--agent-tls-cert", credentials.resolve("controller/tls.crt").toString(),
                "--agent-tls-key", credentials.resolve("controller/tls.key").toString()));
        controller.addAll(controllerFlags);
        Map<String, String> node = new LinkedHashMap<>(nodeEnvironment);
        node.put("AGENT_TLS_CERT", credentials.resolve("node/tls.crt").toString());
        node.put("AGENT_TLS_KEY", credentials.resolve("node/tls.key").toString());
        return start(dir, 1, List.of("--agent-tls-ca", credentials.resolve("ca.crt").toString()), controller, controllerLaunch, node,
                nodeIds);
    }

    /** Starts with controller-server launched as {@code controllerLaunch} says (with environment variables of its own: a crash point). */
    public static Cluster start(Path dir, Launch controllerLaunch, String... nodeIds) throws Exception {
        return start(dir, 1, List.of("--agent-plaintext", "true"), List.of(), controllerLaunch, Map.of(), nodeIds);
    }

    /** How controller-server is launched from now on: at its next {@link #startController(int)}. */
    public void launchControllerAs(Launch launch) {
        controllerLaunch = launch;
    }

    /** Starts {@code replicas} controller-servers (plaintext agent channel) and the node-servers, each registered with all of them. */
    public static Cluster startReplicated(Path dir, int replicas, String... nodeIds) throws Exception {
        return start(dir, replicas, List.of("--agent-plaintext", "true"), List.of(), Launch.HOST, Map.of(), nodeIds);
    }

    private static Cluster start(Path dir, int replicas, List<String> sharedFlags, List<String> controllerFlags, Launch controllerLaunch,
            Map<String, String> nodeEnvironment, String... nodeIds) throws Exception {
        Cluster cluster = new Cluster(dir, replicas, sharedFlags, controllerFlags, nodeEnvironment);
        cluster.controllerLaunch = controllerLaunch;
        try {
            for (int replica = 0; replica < replicas; replica++) {
                cluster.startController(replica);
            }
            for (String nodeId : nodeIds) {
                cluster.startNode(nodeId);
            }
            return cluster;
        } catch (Exception | AssertionError e) {
            cluster.close();
            throw e;
        }
    }

    /**
     * Starts (or restarts, on the same socket and registry port) controller replica {@code replica}
     * (0 is the first); the node-servers already running register with it at their next renewal.
     */
    public void startController(int replica) throws Exception {
        Path socket = dir.resolve((replica == 0 ? "controller" : "controller-" + (replica + 1)) + "/csi.sock");
        List<String> args = new ArrayList<>(List.of(withShared(
                "--endpoint", "unix://" + socket,
                "--agent-registry-address", "127.0.0.1:" + registryPorts.get(replica),
                "--agent-token-file", tokenFile.toString(),
                "--agent-renew-interval", "2s")));
        if (!controllerFlags.contains("--agent-settle-time")) {
            // Every agent starts after the controller here; nothing can be on its way back.
            args.addAll(List.of("--agent-settle-time", "0s"));
        }
        args.addAll(controllerFlags);
        // In its pod: a mount namespace of its own (slave: the host's unmounts still reach it, so it
        // holds no other test's mounts) whose /run holds only its ServiceAccount's files.
        List<String> launcher = controllerLaunch.serviceAccount().map(account -> List.of("unshare", "--mount", "--propagation", "slave",
                "--", "sh", "-c", "mount -t tmpfs -o size=1m,mode=0755 strata-run /run && mkdir -p " + SigningKeys.SERVICE_ACCOUNT_DIR
                        + " && cp \"$0/ca.crt\" \"$0/token\" \"$0/namespace\" " + SigningKeys.SERVICE_ACCOUNT_DIR + "/ && exec \"$@\"",
                account.toString())).orElse(List.of());
        controllers.set(replica, ServerProcess.start(launcher, ControllerServer.class, controllerLaunch.environment(),
                args.toArray(String[]::new)).awaitListening(socket));
        controllerChannels.set(replica, channel(socket));
    }

    /** Kills controller replica {@code replica} (SIGKILL, as a node going down would). */
    public void killController(int replica) {
        controllers.get(replica).close();
        controllerChannels.get(replica).shutdownNow();
    }

    /** Waits until controller replica {@code replica} knows the agent of every node of the cluster. */
    public void awaitRegistered(int replica) throws InterruptedException {
        for (Node node : nodes.values()) {
            awaitRegistered(controllers.get(replica), node);
        }
    }

    /**
     * How a node-server process is started: as a process on the host, or as its container runs it
     * (see {@link #startNode(String, Launch)}); with environment variables of its own besides the
     * cluster's; in a container, optionally with the files kubelet mounts into every pod at
     * /var/run/secrets/kubernetes.io/serviceaccount (ca.crt, token, namespace) from {@code serviceAccount}.
     */
    public record Launch(boolean container, Map<String, String> environment, Optional<Path> serviceAccount) {
        public static final Launch HOST = new Launch(false, Map.of(), Optional.empty());
        public static final Launch CONTAINER = new Launch(true, Map.of(), Optional.empty());

        public Launch with(String variable, String value) {
            Map<String, String> more = new LinkedHashMap<>(environment);
            more.put(variable, value);
            return new Launch(container, Map.copyOf(more), serviceAccount);
        }

        public Launch with(Map<String, String> variables) {
            Launch launch = this;
            for (var variable : variables.entrySet()) {
                launch = launch.with(variable.getKey(), variable.getValue());
            }
            return launch;
        }

        /** As a container whose pod's ServiceAccount files are those in {@code dir} (TestApiServer#serviceAccount writes them). */
        public Launch withServiceAccount(Path dir) {
            return new Launch(true, environment, Optional.of(dir));
        }
    }

    /** Starts (or restarts, keeping its pool) the node-server of {@code nodeId} as a host process. */
    public Node startNode(String nodeId) throws Exception {
        return startNode(nodeId, Launch.HOST);
    }

    /**
     * Starts (or restarts, keeping its pool) the node-server of {@code nodeId}. As a container, it
     * runs in a mount namespace of its own that sees the pool through a bind mount, as the DaemonSet's
     * hostPath volume shows it, and kubelet's directory as a shared mount (Bidirectional propagation):
     * when the process dies the namespace dies with it, exactly as when its container is restarted.
     */
    public Node startNode(String nodeId, Launch launch) throws Exception {
        return startNode(nodeId, launch, "127.0.0.1:0");
    }

    /** Like {@link #startNode(String, Launch)}, the agent listening at {@code agentAddress} (a port of 0: any free one). */
    public Node startNode(String nodeId, Launch launch, String agentAddress) throws Exception {
        Path socket = dir.resolve(nodeId + "/csi.sock");
        Path pool = Files.createDirectories(dir.resolve(nodeId + "/pool"));
        List<String> launcher = List.of();
        Path poolSeen = pool;
        if (launch.container()) {
            Path kubelet = Files.createDirectories(dir.resolve(nodeId + "/kubelet"));
            if (!SystemState.mountsUnder(kubelet).contains(kubelet)) {
                SystemState.run("mount", "--bind", kubelet.toString(), kubelet.toString());
                SystemState.run("mount", "--make-shared", kubelet.toString());
            }
            poolSeen = Files.createDirectories(dir.resolve(nodeId + "/container-pool"));
            // A container sees only what is bound into it. The copies of other test runs' mounts in
            // the system's temporary directory would hold their loop devices for as long as this
            // node-server lives, and fail their detach: they are taken off in here. Each is made
            // private first, and the mount that holds the temporary directory too: an unmount
            // propagates through its parent's peers, so taking off the copy of a mount below a
            // shared one (another run's kubelet directory of a container-mode node) would
            // otherwise take it off in the host as well.
            launcher = List.of("unshare", "--mount", "--propagation", "unchanged", "--", "sh", "-c",
                    "mount --make-private / && mount --make-private \"$(findmnt -n -o TARGET -T \"$2\")\" "
                            + "&& others=$(awk '{print $5}' /proc/self/mountinfo | grep \"^$2/\" | grep -v -e \"^$3$\" -e \"^$3/\" | sort -r) "
                            + "&& for other in $others; do mount --make-private \"$other\" || exit 1; done "
                            + "&& for other in $others; do umount -l \"$other\"; done; "
                            // A pod's own /run, holding only its ServiceAccount's files (none of the host's).
                            + "if [ -n \"$4\" ]; then mount -t tmpfs -o size=1m,mode=0755 strata-run /run "
                            + "&& mkdir -p " + SigningKeys.SERVICE_ACCOUNT_DIR + " "
                            + "&& cp \"$4/ca.crt\" \"$4/token\" \"$4/namespace\" " + SigningKeys.SERVICE_ACCOUNT_DIR + "/ || exit 1; fi; "
                            + "mount --bind \"$0\" \"$1\" && shift 4 && exec \"$@\"",
                    pool.toString(), poolSeen.toString(), Path.of(System.getProperty("java.io.tmpdir")).toRealPath().toString(),
                    dir.toRealPath().toString(), launch.serviceAccount().map(Path::toString).orElse(""));
        }
        Map<String, String> environment = new LinkedHashMap<>(nodeEnvironment);
        environment.putAll(launch.environment());
        ServerProcess process = ServerProcess.start(launcher, NodeServer.class, environment, withShared(
                "--endpoint", "unix://" + socket,
                "--node-id", nodeId,
                "--pool-dir", poolSeen.toString(),
                "--kubelet-dir", dir.toString(),
                "--controller-address", String.join(",", registryPorts.stream().map(port -> "127.0.0.1:" + port).toList()),
                "--agent-address", agentAddress,
                "--agent-token-file", tokenFile.toString())).awaitListening(socket);
        Node node = new Node(nodeId, socket, pool, process, channel(socket));
        nodes.put(nodeId, node);
        for (ServerProcess controller : controllers) {
            awaitRegistered(controller, node);
        }
        return node;
    }

    /** Kills the node-server of {@code nodeId} (SIGKILL: no cleanup) and starts it again on the same pool. */
    public Node restartNode(String nodeId) throws Exception {
        return restartNode(nodeId, Launch.HOST);
    }

    public Node restartNode(String nodeId, Launch launch) throws Exception {
        nodes.get(nodeId).process().close();
        return startNode(nodeId, launch);
    }

    /**
     * Waits until {@code controller} knows the node's agent at the port this process listens on,
     * and holds this very process of the node (its instance), not an earlier one at the same address.
     */
    private void awaitRegistered(ServerProcess controller, Node node) throws InterruptedException {
        int port = agentPort(node.id());
        var instancePattern = Pattern.compile("instance\"?[=:]\"?([0-9a-f]+)");
        node.process().awaitOutputMatching(instancePattern);
        var found = instancePattern.matcher(node.process().output());
        if (!found.find()) {
            throw new AssertionError("node-server " + node.id() + " logged no instance:\n" + node.process().output());
        }
        String instance = found.group(1);
        controller.awaitOutputMatching(Pattern.compile(
                "node=" + Pattern.quote(node.id()) + " address=127\\.0\\.0\\.1:" + port + " instance=" + instance + " "
                        + "|\"node\":\"" + Pattern.quote(node.id()) + "\",\"address\":\"127\\.0\\.0\\.1:" + port
                        + "\",\"instance\":\"" + instance + "\""));
    }

    /** The port the node agent of {@code nodeId} listens on, as it logged it. */
    public int agentPort(String nodeId) throws InterruptedException {
        Node node = nodes.get(nodeId);
        // logfmt (endpoint=tcp://...) or JSON ("endpoint":"tcp://...")
        var pattern = java.util.regex.Pattern.compile("endpoint\"?[=:]\"?tcp://127\\.0\\.0\\.1:(\\d+)");
        node.process().awaitOutputMatching(pattern);
        var port = pattern.matcher(node.process().output());
        if (!port.find()) {
            throw new AssertionError("node-server " + node.id() + " logged no agent port:\n" + node.process().output());
        }
        return Integer.parseInt(port.group(1));
    }

    /** GetCapacity of the node once {@code wanted} holds for it, or after 15 s (the agent reports its pool at its next renewal). */
    public long capacity(String nodeId, java.util.function.LongPredicate wanted) throws InterruptedException {
        csi.v1.Csi.GetCapacityRequest request = csi.v1.Csi.GetCapacityRequest.newBuilder()
                .setAccessibleTopology(PipelineTest.on(nodeId)).build();
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(15);
        long available;
        do {
            available = controller().getCapacity(request).getAvailableCapacity();
            if (wanted.test(available)) {
                return available;
            }
            Thread.sleep(250);
        } while (System.nanoTime() < deadline);
        return available;
    }

    /** The agent token every server of this cluster holds. */
    public Path tokenFile() {
        return tokenFile;
    }

    public Node node(String nodeId) {
        return nodes.get(nodeId);
    }

    public ServerProcess controllerProcess() {
        return controllers.getFirst();
    }

    public ControllerGrpc.ControllerBlockingStub controller() {
        return controller(0);
    }

    /** The Controller service of replica {@code replica}, as its own pod's sidecars call it. */
    public ControllerGrpc.ControllerBlockingStub controller(int replica) {
        return ControllerGrpc.newBlockingStub(controllerChannels.get(replica));
    }

    /** The GroupController service, as csi-snapshotter calls it. */
    public csi.v1.GroupControllerGrpc.GroupControllerBlockingStub groupController() {
        return csi.v1.GroupControllerGrpc.newBlockingStub(controllerChannels.getFirst());
    }

    /** The SnapshotMetadata service on the controller's socket, as external-snapshot-metadata calls it. */
    public csi.v1.SnapshotMetadataGrpc.SnapshotMetadataBlockingStub snapshotMetadata() {
        return csi.v1.SnapshotMetadataGrpc.newBlockingStub(controllerChannels.getFirst());
    }

    public IdentityGrpc.IdentityBlockingStub controllerIdentity() {
        return IdentityGrpc.newBlockingStub(controllerChannels.getFirst());
    }

    public int registryPort() {
        return registryPorts.getFirst();
    }

    /** A directory kubelet would have made for this node (staging paths, pod target parents). */
    public Path kubeletDir(String nodeId, String name) throws IOException {
        return Files.createDirectories(dir.resolve(nodeId + "/kubelet/" + name));
    }

    /** The staging path kubelet gives volume {@code volumeName} on this node, made. */
    public Path stagingPath(String nodeId, String volumeName) throws IOException {
        return kubeletDir(nodeId, "plugins/" + volumeName + "/globalmount");
    }

    /** The target path of a pod's mounted volume {@code volumeName} on this node, its parent made as kubelet makes it. */
    public Path mountTarget(String nodeId, String volumeName) throws IOException {
        return kubeletDir(nodeId, "pods/" + volumeName + "/volumes").resolve("mount");
    }

    private ManagedChannel channel(Path socket) {
        ManagedChannel channel = Sockets.channel(socket);
        channels.add(channel);
        return channel;
    }

    private String[] withShared(String... flags) {
        List<String> all = new ArrayList<>(List.of(flags));
        all.addAll(sharedFlags);
        return all.toArray(String[]::new);
    }

    static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }

    /** Kills every process (no cleanup by the servers: tests undo their own mounts and devices). */
    @Override
    public void close() throws Exception {
        channels.forEach(ManagedChannel::shutdownNow);
        for (Node node : nodes.values()) {
            node.process().close();
        }
        for (ServerProcess controller : controllers) {
            if (controller != null) {
                controller.close();
            }
        }
        for (String nodeId : nodes.keySet()) {
            // The shared mount a container-started node needed; a mount left below it keeps it (and shows as a leftover).
            Path kubelet = dir.resolve(nodeId + "/kubelet");
            if (SystemState.mountsUnder(kubelet).equals(List.of(kubelet))) {
                SystemState.run("umount", kubelet.toString());
            }
        }
    }

    /** All output of every process, for failure messages. */
    public String logs() {
        StringBuilder out = new StringBuilder();
        for (int replica = 0; replica < controllers.size(); replica++) {
            if (controllers.get(replica) != null) {
                out.append("--- controller-server ").append(replica + 1).append('\n').append(controllers.get(replica).output()).append('\n');
            }
        }
        nodes.values().forEach(node -> out.append("--- node-server ").append(node.id()).append('\n')
                .append(node.process().output()).append('\n'));
        return out.toString();
    }
}
