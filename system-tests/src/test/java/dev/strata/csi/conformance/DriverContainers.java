package dev.strata.csi.conformance;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.command.InspectContainerResponse;
import com.github.dockerjava.api.model.Capability;
import com.github.dockerjava.api.model.HostConfig;
import dev.strata.csi.deploy.DockerContainer;
import dev.strata.csi.deploy.Kubelet;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestApiServer;
import dev.strata.csi.testing.TestIssuer;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.stream.Collectors;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.Network;
import org.testcontainers.containers.output.OutputFrame;
import org.testcontainers.containers.startupcheck.StartupCheckStrategy;
import org.testcontainers.containers.wait.strategy.AbstractWaitStrategy;
import org.testcontainers.images.builder.ImageFromDockerfile;

/**
 * controller-server and node-server in containers of the image the Dockerfile builds, each run
 * exactly as deploy/'s manifests run it: args, env, volumes, user, read-only root, capabilities
 * and network as {@link Kubelet} maps the Deployment's and the DaemonSet's pod templates onto
 * Docker, so a change of the manifests is exercised here. The node's filesystem (hostPath volumes,
 * kubelet's directory) is a directory of the test; per-node identity is on as deployed, with
 * ServiceAccount tokens the {@link TestIssuer} signs and its keys served by {@link TestApiServer}
 * over HTTPS as kube-apiserver serves them. The suite on this machine plays kubelet and the
 * sidecars: it reaches the CSI sockets through the volumes that hold them and sees the mounts
 * node-server makes below kubelet's directory (Bidirectional propagation).
 *
 * <p>Needs a Docker engine and a base image ({@value #BASE_IMAGE_PROPERTY}: hack/test.sh builds
 * one). Without either the suite is skipped with the reason, unless {@value #REQUIRE_PROPERTY}
 * is true (CI), where that is a failure.
 */
final class DriverContainers implements AutoCloseable {

    static final String BASE_IMAGE_PROPERTY = "strata.baseImage";
    static final String REQUIRE_PROPERTY = "strata.requireDocker";
    static final String IMAGE = "strata-csi:conformance";
    static final String NODE_NAME = "container-node";
    private static final String REGISTERED = "msg=\"registered with controller\"";
    private static final Duration START_TIMEOUT = Duration.ofSeconds(90);

    /** One server container: how the manifests run it and the container running it. */
    private record Server(DockerContainer spec, GenericContainer<?> container) {

        /** The CSI socket's path inside the container (--endpoint=unix://...). */
        String socket() {
            return spec.flag("endpoint").orElseThrow().replaceFirst("^unix://", "");
        }

        /** The line the server logs once its CSI socket listens; it listens on TCP too, before. */
        String listening() {
            return "msg=listening endpoint=unix://" + socket();
        }

        int lines(String text) {
            return (int) container.getLogs().lines().filter(line -> line.contains(text)).count();
        }

        /** Where this machine reaches the container's ports: its own address, or the node's on the host network. */
        String address() {
            return spec.hostNetwork() ? "127.0.0.1"
                    : container.getContainerInfo().getNetworkSettings().getNetworks().values().iterator().next().getIpAddress();
        }
    }

    private final Path dir;
    private final Kubelet kubelet;
    private final TestApiServer apiServer;
    private final Network network;
    private final List<Server> servers = new ArrayList<>();

    private DriverContainers(Path dir, Kubelet kubelet, TestApiServer apiServer, Network network) {
        this.dir = dir;
        this.kubelet = kubelet;
        this.apiServer = apiServer;
        this.network = network;
    }

    /** kubelet's directory on this machine: staging and pod paths go below it. */
    Path kubeletDir() {
        return kubelet.kubeletDir();
    }

    /** The driver's name, as node-server's args give it. */
    String driverName() {
        return node().spec().flag("driver-name").orElseThrow();
    }

    /** Where a path on this machine is inside the node container (kubelet's paths differ only by the node's root). */
    Optional<String> inNode(Path path) {
        return node().spec().inContainer(path);
    }

    /** The node's pool directory (--pool-dir) on this machine. */
    Path pool() {
        return node().spec().onHost(node().spec().flag("pool-dir").orElseThrow());
    }

    Path controllerSocket() {
        return socketLink(servers.getFirst());
    }

    Path nodeSocket() {
        return socketLink(node());
    }

    private Server node() {
        return servers.getLast();
    }

    /**
     * A short link to the directory holding the server's socket: a volume's path on this machine
     * (below the pod's uid) is longer than a unix socket's address may be.
     */
    private Path socketLink(Server server) {
        Path socket = server.spec().onHost(server.socket());
        Path link = dir.resolve("s-" + server.spec().name());
        try {
            if (!Files.isSymbolicLink(link)) {
                Files.createSymbolicLink(link, socket.getParent());
            }
        } catch (IOException e) {
            throw new AssertionError("cannot link " + link + " to " + socket.getParent(), e);
        }
        return link.resolve(socket.getFileName());
    }

    /**
     * Restarts the node-server container as a DaemonSet rollout replaces the pod: SIGTERM, then the
     * program starts again in a new mount namespace. Returns once it has registered with the
     * controller again and listens on its socket.
     */
    void restartNode() throws InterruptedException {
        Server node = node();
        int registered = node.lines(REGISTERED);
        int listened = node.lines(node.listening());
        node.container().getDockerClient().restartContainerCmd(node.container().getContainerId()).withTimeout(30).exec();
        awaitReady(node, List.of(REGISTERED, node.listening()), registered, listened);
    }

    /** The servers as deploy/ runs them. */
    static DriverContainers start(Path dir) throws Exception {
        return start(dir, Kubelet.deployDir().toAbsolutePath());
    }

    /** The servers as the manifests in {@code deploy} (a copy of deploy/, perhaps edited) run them; the image is the repository's. */
    static DriverContainers start(Path dir, Path deploy) throws Exception {
        String base = requirePossible();

        Path repository = Kubelet.deployDir().toAbsolutePath().getParent();
        long started = System.nanoTime();
        // The image builds while the credentials, the apiserver stand-in and the node's directories are made.
        CompletableFuture<String> building = CompletableFuture.supplyAsync(() -> new ImageFromDockerfile(IMAGE, false)
                .withDockerfile(repository.resolve("Dockerfile"))
                .withBuildArg("BASE_IMAGE", base)
                .get());

        Path credentials = dir.resolve("credentials");
        String made = SystemState.run("bash", repository.resolve("hack/agent-credentials.sh").toString(), credentials.toString(), "2");
        assertTrue(made.contains("wrote token"), made);

        Network network = Network.newNetwork();
        TestApiServer apiServer = null;
        Kubelet kubelet = null;
        try {
            // The node and the apiserver are this machine, as the containers reach it: its address on their network.
            String hostIp = gateway(network);
            TestIssuer issuer = new TestIssuer("strata-conformance-key");
            apiServer = TestApiServer.start(issuer, dir.resolve("apiserver"), hostIp, List.of(hostIp));
            Path root = dir.resolve("node");
            // What a node has before the driver is installed: kubelet's directory and its plugin registry.
            Files.createDirectories(root.resolve("var/lib/kubelet/plugins_registry"));
            kubelet = new Kubelet(new Kubelet.Site(root, NODE_NAME, hostIp, hostIp, apiServer.port(), apiServer.caFile(), issuer,
                    Map.of("strata-controller-credentials", credentials, "strata-node-credentials", credentials)), deploy);
        } catch (Exception | AssertionError e) {
            if (apiServer != null) {
                apiServer.close();
            }
            network.close();
            throw e;
        }
        DriverContainers driver = new DriverContainers(dir, kubelet, apiServer, network);
        try {
            String image;
            try {
                image = building.join();
            } catch (CompletionException e) {
                throw new AssertionError("the image does not build from the Dockerfile: " + e.getCause().getMessage(), e.getCause());
            }
            Duration built = Duration.ofNanos(System.nanoTime() - started);
            started = System.nanoTime();
            // Both pods start at once, as on a cluster: the node agent registers once the controller listens.
            Server controller = driver.run(image, kubelet.prepare("Deployment", "strata-controller"));
            Server node = driver.run(image, kubelet.prepare("DaemonSet", "strata-node"));
            driver.awaitReady(controller, List.of(controller.listening()));
            // Registered with the controller (CreateVolume can place volumes on it) and listening on its
            // CSI socket, in either order.
            driver.awaitReady(node, List.of(REGISTERED, node.listening()));
            System.out.printf("containers: image built after %d s, servers ready %d s later%n", built.toSeconds(),
                    Duration.ofNanos(System.nanoTime() - started).toSeconds());
            return driver;
        } catch (Exception | AssertionError e) {
            driver.close();
            throw e;
        }
    }

    /** The address of this machine on {@code network}. */
    private static String gateway(Network network) {
        return DockerClientFactory.instance().client().inspectNetworkCmd().withNetworkId(network.getId()).exec()
                .getIpam().getConfig().getFirst().getGateway();
    }

    /**
     * Skips the calling test where no containers can run here (fails it where they are required);
     * else the base image. A test that expects start to fail calls this first, so a skip is not
     * taken for the failure it expects.
     */
    static String requirePossible() {
        boolean required = Boolean.getBoolean(REQUIRE_PROPERTY);
        String base = System.getProperty(BASE_IMAGE_PROPERTY);
        unlessPossible(DockerClientFactory.instance().isDockerAvailable(), required,
                "no Docker engine is reachable (hack/test.sh starts one)");
        unlessPossible(base != null && !base.isBlank(), required,
                "no base image given with -D" + BASE_IMAGE_PROPERTY + " (hack/test.sh builds one with hack/base-image.sh)");
        Root.require();
        return base;
    }

    /** Skips the suite with the reason, or fails it where containers are required. */
    private static void unlessPossible(boolean possible, boolean required, String reason) {
        if (!possible && required) {
            fail(reason + ", and -D" + REQUIRE_PROPERTY + "=true says the container tests must run");
        }
        assumeTrue(possible, "container tests skipped: " + reason);
    }

    /** Starts a container as {@code spec} says; whether it comes up is {@link #awaitReady}'s to see. */
    private Server run(String image, DockerContainer spec) {
        GenericContainer<?> container = new GenericContainer<>(image)
                .withCommand(spec.args().toArray(String[]::new))
                .withEnv(spec.env())
                .withLogConsumer((OutputFrame frame) -> System.out.print("[" + spec.name() + "] " + frame.getUtf8String()))
                // Whether it starts, and why not, is awaitReady's to report, with its output and exit code.
                .withStartupCheckStrategy(new StartupCheckStrategy() {
                    @Override
                    public StartupStatus checkStartupState(DockerClient client, String id) {
                        return StartupStatus.SUCCESSFUL;
                    }
                })
                .waitingFor(new AbstractWaitStrategy() {
                    @Override
                    protected void waitUntilReady() {}
                });
        if (spec.hostNetwork()) {
            container.withNetworkMode("host");
            if (spec.resolvesServices()) {
                // Cluster DNS for a pod on the host network: the Services' names, to the pods they select.
                for (Server other : servers) {
                    other.spec().serviceNames().forEach(name -> container.withExtraHost(name, other.address()));
                }
            }
        } else {
            container.withNetwork(network).withNetworkAliases(spec.serviceNames().toArray(String[]::new));
        }
        container.withCreateContainerCmdModifier(command -> {
            if (!spec.entrypoint().isEmpty()) {
                command.withEntrypoint(spec.entrypoint());
            }
            spec.user().ifPresent(command::withUser);
            HostConfig host = command.getHostConfig();
            host.withBinds(spec.binds())
                    .withTmpFs(spec.tmpfs())
                    .withReadonlyRootfs(spec.readOnlyRoot())
                    .withCapAdd(spec.capAdd().toArray(Capability[]::new))
                    .withCapDrop(spec.capDrop().toArray(Capability[]::new))
                    .withSecurityOpts(spec.securityOpts())
                    .withDeviceCgroupRules(spec.deviceCgroupRules());
            spec.memoryBytes().ifPresent(bytes -> host.withMemory(bytes).withMemorySwap(bytes));
            spec.nanoCpus().ifPresent(host::withNanoCPUs);
        });
        Server server = new Server(spec, container);
        servers.add(server);
        container.start();
        return server;
    }

    private void awaitReady(Server server, List<String> lines) throws InterruptedException {
        awaitReady(server, lines, new int[lines.size()]);
    }

    private void awaitReady(Server server, List<String> lines, int... before) throws InterruptedException {
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        while (true) {
            InspectContainerResponse.ContainerState state = server.container().getDockerClient()
                    .inspectContainerCmd(server.container().getContainerId()).exec().getState();
            if (!Boolean.TRUE.equals(state.getRunning())) {
                fail(server.spec().name() + " exited with code " + state.getExitCodeLong() + " before it was ready, run as "
                        + server.spec().pod() + " of deploy/ runs it (args " + server.spec().args() + ")" + output());
            }
            List<String> missing = new ArrayList<>();
            for (int i = 0; i < lines.size(); i++) {
                if (server.lines(lines.get(i)) <= before[i]) {
                    missing.add("the log line '" + lines.get(i) + "'");
                }
            }
            server.spec().readiness().filter(probe -> !ready(server, probe))
                    .ifPresent(probe -> missing.add("its readinessProbe, HTTP 200 from GET :" + probe.port() + probe.path()));
            if (missing.isEmpty()) {
                return;
            }
            if (System.nanoTime() > deadline) {
                fail(server.spec().name() + " is not ready within " + START_TIMEOUT.toSeconds() + " s: no "
                        + missing.stream().collect(Collectors.joining(", no ")) + output());
            }
            Thread.sleep(200);
        }
    }

    /** Every server's output so far: why one is not ready may be in another's (a refused registration). */
    private String output() {
        return servers.stream().map(server -> "\n--- output of " + server.spec().name() + ":\n" + server.container().getLogs())
                .collect(Collectors.joining());
    }

    /** The readiness probe as kubelet sends it: any status from 200 to 399 is ready. */
    private static boolean ready(Server server, DockerContainer.HttpGet probe) {
        try (HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(3)).build()) {
            URI uri = URI.create("http://" + server.address() + ":" + probe.port() + probe.path());
            int status = client.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(3)).GET().build(),
                    HttpResponse.BodyHandlers.discarding()).statusCode();
            return status >= 200 && status < 400;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    @Override
    public void close() throws Exception {
        // node-server first: on SIGTERM it stops serving; nothing it made is left (the suite undid it).
        for (Server server : servers.reversed()) {
            server.container().stop();
        }
        network.close();
        apiServer.close();
        kubelet.close();
    }
}
