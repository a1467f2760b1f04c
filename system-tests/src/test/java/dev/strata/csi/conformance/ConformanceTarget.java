package dev.strata.csi.conformance;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.protobuf.ProtocolMessageEnum;
import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import csi.v1.Csi.ControllerServiceCapability;
import csi.v1.Csi.GetPluginCapabilitiesRequest;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.NodeGetCapabilitiesRequest;
import csi.v1.Csi.NodeGetInfoRequest;
import csi.v1.Csi.NodeGetInfoResponse;
import csi.v1.Csi.NodeServiceCapability;
import csi.v1.Csi.PluginCapability;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.IdentityGrpc;
import csi.v1.NodeGrpc;
import dev.strata.csi.e2e.Cluster;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.Sockets;
import io.grpc.Channel;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The controller and node endpoints under test and what the suite learns from them before any
 * test runs: the node's id and topology, and every advertised capability.
 *
 * <p>With {@code -Dconformance.controller=unix:///…} and {@code -Dconformance.node=unix:///…} it
 * talks to those endpoints; otherwise it starts a local cluster (controller-server and one
 * node-server as processes) in the given directory.
 */
final class ConformanceTarget implements AutoCloseable {

    static final String CONTROLLER_PROPERTY = "conformance.controller";
    static final String NODE_PROPERTY = "conformance.node";
    /** true: run controller-server and node-server in containers of the project's image ({@link DriverContainers}). */
    static final String CONTAINERS_PROPERTY = "conformance.containers";

    /** Endpoints are other drivers too: a slow CreateVolume must not hang the suite forever. */
    private static final long CALL_TIMEOUT_SECONDS = 60;
    private static final long MIB = 1L << 20;

    /**
     * Every capability a check or a step of the suite depends on. {@link #advertises} takes no
     * other, so a new gate cannot be added without the local driver being held to it too.
     */
    static final List<ProtocolMessageEnum> GATES = List.of(
            PluginCapability.Service.Type.CONTROLLER_SERVICE,
            PluginCapability.Service.Type.GROUP_CONTROLLER_SERVICE,
            PluginCapability.Service.Type.VOLUME_ACCESSIBILITY_CONSTRAINTS,
            ControllerServiceCapability.RPC.Type.CREATE_DELETE_VOLUME,
            ControllerServiceCapability.RPC.Type.PUBLISH_UNPUBLISH_VOLUME,
            ControllerServiceCapability.RPC.Type.LIST_VOLUMES,
            ControllerServiceCapability.RPC.Type.GET_CAPACITY,
            ControllerServiceCapability.RPC.Type.MODIFY_VOLUME,
            NodeServiceCapability.RPC.Type.STAGE_UNSTAGE_VOLUME,
            NodeServiceCapability.RPC.Type.GET_VOLUME_STATS);

    /** Which endpoint an Identity call goes to: both serve Identity. */
    enum Endpoint { CONTROLLER, NODE }

    private final Cluster cluster; // null for external endpoints
    private final DriverContainers containers; // null unless the servers run in containers
    private final Channel controllerChannel;
    private Channel nodeChannel; // replaced when node-server is restarted
    private final List<ManagedChannel> ownChannels; // the cluster closes its own
    private final Path stagingRoot;
    private final Path mountRoot;
    private final List<Path> checkedForLeftovers;
    private final long volumeBytes;
    private NodeGetInfoResponse nodeInfo;
    private final Set<ProtocolMessageEnum> advertised = new HashSet<>();

    private ConformanceTarget(Cluster cluster, Channel controllerChannel, Channel nodeChannel, List<ManagedChannel> ownChannels,
            Path stagingRoot, Path mountRoot, List<Path> checkedForLeftovers) {
        this(cluster, null, controllerChannel, nodeChannel, ownChannels, stagingRoot, mountRoot, checkedForLeftovers);
    }

    private ConformanceTarget(Cluster cluster, DriverContainers containers, Channel controllerChannel, Channel nodeChannel,
            List<ManagedChannel> ownChannels, Path stagingRoot, Path mountRoot, List<Path> checkedForLeftovers) {
        this.cluster = cluster;
        this.containers = containers;
        this.controllerChannel = controllerChannel;
        this.nodeChannel = nodeChannel;
        this.ownChannels = ownChannels;
        this.stagingRoot = stagingRoot;
        this.mountRoot = mountRoot;
        this.checkedForLeftovers = checkedForLeftovers;
        this.volumeBytes = Long.getLong("conformance.volumeBytes", 64 * MIB);
    }

    /** Whether the endpoints come from system properties rather than a local cluster. */
    static boolean external() {
        return System.getProperty(CONTROLLER_PROPERTY) != null || System.getProperty(NODE_PROPERTY) != null;
    }

    static ConformanceTarget open(Path dir) throws Exception {
        ConformanceTarget target = Boolean.getBoolean(CONTAINERS_PROPERTY) ? openContainers(dir)
                : external() ? openExternal(dir) : openLocal(dir);
        try {
            target.discover();
            return target;
        } catch (Exception | AssertionError e) {
            target.close();
            throw e;
        }
    }

    private static ConformanceTarget openLocal(Path dir) throws Exception {
        Root.require();
        Cluster cluster = Cluster.start(dir, "conformance-node"); // its directory is kubelet's too
        Channel controller = cluster.controller().getChannel();
        Channel node = cluster.node("conformance-node").channel();
        Path staging = Files.createDirectories(dir.resolve("staging"));
        Path mount = Files.createDirectories(dir.resolve("mnt"));
        // The whole directory: images in the pool included, so a loop device left attached shows too.
        return new ConformanceTarget(cluster, controller, node, List.of(), staging, mount, List.of(dir));
    }

    private static ConformanceTarget openExternal(Path dir) throws Exception {
        String controller = System.getProperty(CONTROLLER_PROPERTY);
        String node = System.getProperty(NODE_PROPERTY);
        if (controller == null || node == null) {
            throw new IllegalArgumentException("set both -D" + CONTROLLER_PROPERTY + " and -D" + NODE_PROPERTY
                    + " (they may name the same endpoint), or neither to test a local cluster");
        }
        // Our own directory below the given parents, so leftovers of other users there are not ours.
        String run = "conformance-" + randomHex();
        Path staging = Files.createDirectories(Path.of(System.getProperty("conformance.stagingDir", dir.resolve("staging").toString()), run));
        Path mount = Files.createDirectories(Path.of(System.getProperty("conformance.mountDir", dir.resolve("mnt").toString()), run));
        ManagedChannel controllerChannel = channel(controller);
        ManagedChannel nodeChannel = channel(node);
        return new ConformanceTarget(null, controllerChannel, nodeChannel, List.of(controllerChannel, nodeChannel),
                staging, mount, List.of(staging, mount));
    }

    /**
     * Our image's servers in containers, run as deploy/ runs them; staging and pod directories
     * where kubelet makes them, below kubelet's directory on the node (a directory of the test).
     */
    private static ConformanceTarget openContainers(Path dir) throws Exception {
        DriverContainers driver = DriverContainers.start(dir);
        try {
            String run = "conformance-" + randomHex();
            Path staging = Files.createDirectories(driver.kubeletDir().resolve("plugins/kubernetes.io/csi")
                    .resolve(driver.driverName()).resolve(run));
            Path mount = Files.createDirectories(driver.kubeletDir().resolve("pods").resolve(run));
            ManagedChannel controllerChannel = Sockets.channel(driver.controllerSocket());
            ManagedChannel nodeChannel = Sockets.channel(driver.nodeSocket());
            awaitSettled(controllerChannel);
            return new ConformanceTarget(null, driver, controllerChannel,
                    ClientInterceptors.intercept(nodeChannel, new ContainerPaths(driver::inNode)),
                    List.of(controllerChannel, nodeChannel), staging, mount, List.of(staging, mount));
        } catch (Exception | AssertionError e) {
            driver.close();
            throw e;
        }
    }

    /**
     * Waits, as the sidecars' retries do, while controller-server answers UNAVAILABLE after its
     * start (--agent-settle-time, which deploy/ leaves at its default): until then it cannot tell
     * an agent on its way back from a node that has none.
     */
    private static void awaitSettled(Channel controller) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(CALL_TIMEOUT_SECONDS);
        while (true) {
            try {
                ControllerGrpc.newBlockingStub(controller).withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS)
                        .listVolumes(ListVolumesRequest.newBuilder().setMaxEntries(1).build());
                return;
            } catch (StatusRuntimeException e) {
                if (e.getStatus().getCode() != Status.Code.UNAVAILABLE || System.nanoTime() > deadline) {
                    throw e;
                }
            }
            Thread.sleep(500);
        }
    }

    /** unix:///path or an absolute path is a unix socket; anything else a gRPC target such as dns:///host:port. */
    private static ManagedChannel channel(String endpoint) {
        if (endpoint.startsWith("unix://")) {
            return Sockets.channel(Path.of(endpoint.substring("unix://".length())));
        }
        if (endpoint.startsWith("/")) {
            return Sockets.channel(Path.of(endpoint));
        }
        return ManagedChannelBuilder.forTarget(endpoint).usePlaintext().build();
    }

    /** Reads what every later gate and request depends on; a failure here fails the whole suite. */
    private void discover() {
        for (Endpoint endpoint : Endpoint.values()) {
            for (PluginCapability capability : identity(endpoint).getPluginCapabilities(
                    GetPluginCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList()) {
                if (capability.hasService()) {
                    advertised.add(capability.getService().getType());
                }
            }
        }
        // Without the Controller service there are no controller capabilities to ask for.
        if (advertised.contains(PluginCapability.Service.Type.CONTROLLER_SERVICE)) {
            controller().controllerGetCapabilities(ControllerGetCapabilitiesRequest.getDefaultInstance())
                    .getCapabilitiesList().forEach(capability -> advertised.add(capability.getRpc().getType()));
        }
        node().nodeGetCapabilities(NodeGetCapabilitiesRequest.getDefaultInstance())
                .getCapabilitiesList().forEach(capability -> advertised.add(capability.getRpc().getType()));
        nodeInfo = node().nodeGetInfo(NodeGetInfoRequest.getDefaultInstance());
    }

    IdentityGrpc.IdentityBlockingStub identity(Endpoint endpoint) {
        return IdentityGrpc.newBlockingStub(endpoint == Endpoint.CONTROLLER ? controllerChannel : nodeChannel)
                .withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS);
    }

    ControllerGrpc.ControllerBlockingStub controller() {
        return ControllerGrpc.newBlockingStub(controllerChannel).withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS);
    }

    csi.v1.GroupControllerGrpc.GroupControllerBlockingStub groupController() {
        return csi.v1.GroupControllerGrpc.newBlockingStub(controllerChannel).withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS);
    }

    NodeGrpc.NodeBlockingStub node() {
        return NodeGrpc.newBlockingStub(nodeChannel).withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS);
    }

    /** NodeGetInfo as answered at the start: the node every volume is published to. */
    NodeGetInfoResponse nodeInfo() {
        return nodeInfo;
    }

    String nodeId() {
        return nodeInfo.getNodeId();
    }

    /** Volumes go where the node can reach them: its own topology as requisite, when it reports one. */
    TopologyRequirement accessibleFromNode() {
        return nodeInfo.hasAccessibleTopology()
                ? TopologyRequirement.newBuilder().addRequisite(nodeInfo.getAccessibleTopology()).build()
                : TopologyRequirement.getDefaultInstance();
    }

    /** Whether the driver advertises {@code capability}, a plugin, controller or node capability in {@link #GATES}. */
    boolean advertises(ProtocolMessageEnum capability) {
        if (!GATES.contains(capability)) {
            throw new IllegalArgumentException(capability + " is not in GATES; add it there");
        }
        return advertised.contains(capability);
    }

    /** Skips the check, visibly and with the reason, when the driver does not offer what it tests. */
    void assume(ProtocolMessageEnum capability) {
        assumeTrue(advertises(capability),
                "the driver does not advertise " + capability.getDescriptorForType().getFullName() + " " + capability);
    }

    /** The access types to test ({@code -Dconformance.accessType}); parameterized tests take them from here. */
    static List<AccessType> accessTypes() {
        return AccessType.parse(System.getProperty("conformance.accessType"));
    }

    /** The access type of tests where it does not matter: the first configured. */
    AccessType accessType() {
        return accessTypes().getFirst();
    }

    /** Size of every test volume ({@code -Dconformance.volumeBytes}). */
    long volumeBytes() {
        return volumeBytes;
    }

    /** A volume name no earlier run used: an external driver may still hold volumes of one that failed. */
    static String uniqueName(String purpose) {
        return "conformance-" + purpose + "-" + randomHex();
    }

    /** An id the driver never handed out, of the kind a CO could send after losing track of a volume. */
    static String madeUpId(String kind) {
        return "made-up-" + kind + "-" + randomHex();
    }

    /** A fresh, existing directory, as the CO makes one before NodeStageVolume. */
    Path newStagingPath() throws Exception {
        return Files.createDirectory(stagingRoot.resolve("staging-" + randomHex()));
    }

    /** A path that does not exist yet in a directory that does: NodePublishVolume creates it. */
    Path newTargetPath() throws Exception {
        return Files.createDirectory(mountRoot.resolve("pod-" + randomHex())).resolve("target");
    }

    /** A directory that exists but holds no volume. */
    Path unrelatedDirectory() throws Exception {
        return Files.createDirectory(mountRoot.resolve("unrelated-" + randomHex()));
    }

    /** Whether this target can restart node-server: not an external driver's. */
    boolean restartsNode() {
        return cluster != null || containers != null;
    }

    /**
     * Restarts node-server as a rollout of the node DaemonSet does: a container is restarted (a new
     * mount namespace), a local cluster's process is killed and started again (CrashRecoveryTest
     * restarts it in a namespace of its own). Returns once it is back and registered.
     */
    void restartNode() throws Exception {
        if (cluster != null) {
            nodeChannel = cluster.restartNode(nodeId()).channel();
        } else {
            containers.restartNode();
            ownChannels.forEach(ManagedChannel::resetConnectBackoff);
        }
    }

    /** The image file of a volume of the local-disk backend on this target's node. */
    Path imageOf(Volume volume) {
        String id = volume.getVolumeId();
        Path pool = cluster != null ? cluster.node(nodeId()).pool() : containers.pool();
        return pool.resolve(id.substring(id.lastIndexOf('/') + 1) + ".img");
    }

    /** Whether the driver's mounts show in this process's mount table: a local cluster, or containers sharing their mounts. */
    boolean seesDriverMounts() {
        return cluster != null || containers != null;
    }

    /**
     * Mounts and loop devices left below the suite's directories, which it then removes (the pool
     * of a local cluster included). Empty after every test that cleaned up after itself.
     */
    List<String> leftovers() throws Exception {
        List<String> found = new ArrayList<>();
        for (Path dir : checkedForLeftovers) {
            found.addAll(SystemState.cleanUp(dir));
        }
        return found;
    }

    private static String randomHex() {
        return HexFormat.of().toHexDigits(ThreadLocalRandom.current().nextInt());
    }

    @Override
    public void close() throws Exception {
        ownChannels.forEach(ManagedChannel::shutdownNow);
        if (cluster != null) {
            cluster.close();
        } else if (containers != null) {
            containers.close(); // removes the whole shared directory's mounts
        } else {
            // The CO's part: the directories it made for staging and pods, once they are empty.
            for (Path dir : checkedForLeftovers) {
                removeEmptyDirectories(dir);
            }
        }
    }

    /** Deletes {@code dir} and the directories below it, deepest first, stopping short of anything not empty. */
    private static void removeEmptyDirectories(Path dir) throws IOException {
        List<Path> deepestFirst;
        try (Stream<Path> paths = Files.walk(dir)) {
            deepestFirst = paths.filter(path -> Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS))
                    .sorted(Comparator.reverseOrder()).toList();
        }
        for (Path path : deepestFirst) {
            try {
                Files.delete(path);
            } catch (IOException e) {
                // not empty, or still a mount point: left for a person to look at
            }
        }
    }
}
