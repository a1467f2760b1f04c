package dev.strata.csi.conformance;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.github.dockerjava.api.model.AccessMode;
import com.github.dockerjava.api.model.Bind;
import com.github.dockerjava.api.model.Capability;
import com.github.dockerjava.api.model.Device;
import com.github.dockerjava.api.model.HostConfig;
import com.github.dockerjava.api.model.PropagationMode;
import com.github.dockerjava.api.model.SELContext;
import com.github.dockerjava.api.model.Volume;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.Network;
import org.testcontainers.containers.output.OutputFrame;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.containers.wait.strategy.WaitAllStrategy;
import org.testcontainers.images.builder.ImageFromDockerfile;

/**
 * controller-server and node-server in containers of the image the Dockerfile builds, as a
 * cluster runs them: node-server with SYS_ADMIN and the host's loop devices (no --privileged),
 * each on its own network address, the agent channel over TLS with credentials made by
 * hack/agent-credentials.sh. The CSI sockets and kubelet's directories are in one host directory
 * bind-mounted at the same path with shared propagation, so the suite on the host reaches the
 * sockets and sees the mounts node-server makes, as kubelet does.
 *
 * <p>Needs a Docker engine and a base image ({@value #BASE_IMAGE_PROPERTY}: hack/test.sh builds
 * one). Without either the suite is skipped with the reason, unless {@value #REQUIRE_PROPERTY}
 * is true (CI), where that is a failure.
 */
final class DriverContainers implements AutoCloseable {

    static final String BASE_IMAGE_PROPERTY = "strata.baseImage";
    static final String REQUIRE_PROPERTY = "strata.requireDocker";
    static final String IMAGE = "strata-csi:conformance";
    private static final String REGISTERED = "msg=\"registered with controller\"";
    private static final String NODE_ID = "container-node";
    private static final Duration START_TIMEOUT = Duration.ofSeconds(90);

    private final Path shared;
    private final Path pool;
    private final List<GenericContainer<?>> containers;
    private final Network network;

    private DriverContainers(Path shared, Path pool, List<GenericContainer<?>> containers, Network network) {
        this.shared = shared;
        this.pool = pool;
        this.containers = containers;
        this.network = network;
    }

    /** The directory whose mounts node-server and the host share; sockets, staging and pod paths go below it. */
    Path shared() {
        return shared;
    }

    /** The node's pool directory, the same path inside the node container as on the host. */
    Path pool() {
        return pool;
    }

    /**
     * Restarts the node-server container as a DaemonSet rollout replaces the pod: SIGTERM, then the
     * program starts again in a new mount namespace. Returns once it has registered with the
     * controller again.
     */
    void restartNode() throws InterruptedException {
        GenericContainer<?> node = containers.getLast();
        String listening = listeningOn(nodeSocket());
        int registered = lines(node, REGISTERED);
        int listened = lines(node, listening);
        node.getDockerClient().restartContainerCmd(node.getContainerId()).withTimeout(30).exec();
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        // Both: node-server registers from a thread of its own, which may come before or after its CSI socket listens.
        while (lines(node, REGISTERED) <= registered || lines(node, listening) <= listened) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("node-server did not register again and listen on its socket after its container restarted:\n"
                        + node.getLogs());
            }
            Thread.sleep(100);
        }
    }

    private static int lines(GenericContainer<?> container, String text) {
        return (int) container.getLogs().lines().filter(line -> line.contains(text)).count();
    }

    /** The line a server logs once its CSI socket {@code socket} listens; it listens on TCP too, before. */
    private static String listeningOn(Path socket) {
        return "msg=listening endpoint=unix://" + socket;
    }

    Path controllerSocket() {
        return shared.resolve("sockets/controller.sock");
    }

    Path nodeSocket() {
        return shared.resolve("sockets/node.sock");
    }

    static DriverContainers start(Path dir) throws Exception {
        boolean required = Boolean.getBoolean(REQUIRE_PROPERTY);
        String base = System.getProperty(BASE_IMAGE_PROPERTY);
        unlessPossible(DockerClientFactory.instance().isDockerAvailable(), required,
                "no Docker engine is reachable (hack/test.sh starts one)");
        unlessPossible(base != null && !base.isBlank(), required,
                "no base image given with -D" + BASE_IMAGE_PROPERTY + " (hack/test.sh builds one with hack/base-image.sh)");
        Root.require();

        Path repository = Path.of(System.getProperty("user.dir")).getParent();
        String image = new ImageFromDockerfile(IMAGE, false)
                .withDockerfile(repository.resolve("Dockerfile"))
                .withBuildArg("BASE_IMAGE", base)
                .get();

        Path credentials = dir.resolve("credentials");
        String made = SystemState.run("bash", repository.resolve("hack/agent-credentials.sh").toString(), credentials.toString(), "2");
        assertTrue(made.contains("wrote token"), made);
        Path pool = Files.createDirectories(dir.resolve("pool"));
        Path shared = Files.createDirectories(dir.resolve("shared"));
        Files.createDirectories(shared.resolve("sockets"));
        // Docker propagates mounts back only from a shared mount: make the directory one.
        SystemState.run("mount", "--bind", shared.toString(), shared.toString());
        SystemState.run("mount", "--make-shared", shared.toString());

        List<GenericContainer<?>> started = new ArrayList<>();
        Network network = Network.newNetwork();
        DriverContainers driver = new DriverContainers(shared, pool, started, network);
        try {
            // As deploy/ runs them: with the HTTP endpoint too (the image's runtime must have the JDK's HTTP server).
            String[] common = {"--agent-token-file=/etc/strata/agent/token", "--agent-tls-cert=/etc/strata/agent/tls.crt",
                    "--agent-tls-key=/etc/strata/agent/tls.key", "--agent-tls-ca=/etc/strata/agent/ca.crt", "--http-endpoint=:9873"};
            GenericContainer<?> controller = container(image, network, "controller",
                    List.of(readOnly(credentials, "/etc/strata/agent"), writable(shared.resolve("sockets"), PropagationMode.DEFAULT_MODE)),
                    false)
                    .withCommand(concat(new String[] {"/opt/strata/controller-server.jar",
                            "--endpoint=unix://" + driver.controllerSocket(), "--agent-registry-address=0.0.0.0:9869",
                            // Its one node registers before the suite starts (the node's wait below):
                            // no need to wait out the time other agents would take to come back.
                            "--agent-settle-time=0s"}, common))
                    .waitingFor(Wait.forLogMessage(".*" + Pattern.quote(listeningOn(driver.controllerSocket())) + ".*", 1)
                            .withStartupTimeout(START_TIMEOUT));
            start(controller, started);
            GenericContainer<?> node = container(image, network, "node",
                    List.of(readOnly(credentials, "/etc/strata/agent"), writable(pool, PropagationMode.DEFAULT_MODE),
                            writable(shared, PropagationMode.RSHARED)),
                    true)
                    .withCommand(concat(new String[] {"/opt/strata/node-server.jar", "--endpoint=unix://" + driver.nodeSocket(),
                            "--node-id=" + NODE_ID, "--pool-dir=" + pool, "--kubelet-dir=" + shared, "--controller-address=controller:9869",
                            "--agent-address=0.0.0.0:9870", "--agent-advertise-host=node"}, common))
                    // Registered with the controller (CreateVolume can place volumes on it) and listening on its
                    // CSI socket, in either order.
                    .waitingFor(new WaitAllStrategy()
                            .withStrategy(Wait.forLogMessage(".*" + REGISTERED + ".*", 1))
                            .withStrategy(Wait.forLogMessage(".*" + Pattern.quote(listeningOn(driver.nodeSocket())) + ".*", 1))
                            .withStartupTimeout(START_TIMEOUT));
            start(node, started);
            return driver;
        } catch (Exception | AssertionError e) {
            driver.close();
            throw e;
        }
    }

    /** Skips the suite with the reason, or fails it where containers are required. */
    private static void unlessPossible(boolean possible, boolean required, String reason) {
        if (!possible && required) {
            fail(reason + ", and -D" + REQUIRE_PROPERTY + "=true says the container tests must run");
        }
        assumeTrue(possible, "container tests skipped: " + reason);
    }

    private static void start(GenericContainer<?> container, List<GenericContainer<?>> started) {
        started.add(container);
        container.start();
    }

    private static GenericContainer<?> container(String image, Network network, String alias, List<Bind> binds, boolean node)
            throws IOException {
        GenericContainer<?> container = new GenericContainer<>(image)
                .withNetwork(network)
                .withNetworkAliases(alias)
                .withLogConsumer((OutputFrame frame) -> System.out.print("[" + alias + "] " + frame.getUtf8String()));
        List<Device> devices = node ? loopDevices() : List.of();
        return container.withCreateContainerCmdModifier(command -> {
            HostConfig host = command.getHostConfig();
            host.withBinds(binds);
            // As deploy/controller.yaml runs it: a read-only root and no /tmp to write to (the
            // image holds its native libraries unpacked).
            host.withReadonlyRootfs(!node);
            if (node) {
                // What a node plugin needs short of --privileged, which this sandbox refuses:
                // mount(2) and the loop devices, including ones it creates (block major 7).
                host.withCapAdd(Capability.SYS_ADMIN)
                        .withDevices(devices)
                        .withDeviceCgroupRules(List.of("b 7:* rwm", "c 10:237 rwm"));
            }
        });
    }

    private static List<Device> loopDevices() throws IOException {
        try (Stream<Path> dev = Files.list(Path.of("/dev"))) {
            return dev.filter(path -> path.getFileName().toString().matches("loop(-control|\\d+)"))
                    .map(path -> new Device("rwm", path.toString(), path.toString())).toList();
        }
    }

    private static Bind readOnly(Path host, String inContainer) {
        return new Bind(host.toString(), new Volume(inContainer), AccessMode.ro, SELContext.none, null, PropagationMode.DEFAULT_MODE);
    }

    /** At the same path inside as outside, so paths the suite sends mean the same file to node-server. */
    private static Bind writable(Path host, PropagationMode propagation) {
        return new Bind(host.toString(), new Volume(host.toString()), AccessMode.rw, SELContext.none, null, propagation);
    }

    private static String[] concat(String[] a, String[] b) {
        return Stream.concat(Stream.of(a), Stream.of(b)).toArray(String[]::new);
    }

    @Override
    public void close() throws Exception {
        // node-server first: on SIGTERM it stops serving; nothing it made is left (the suite undid it).
        for (GenericContainer<?> container : containers.reversed()) {
            container.stop();
        }
        network.close();
        SystemState.run("umount", "--lazy", shared.toString());
    }
}
