import csi.v1.ControllerGrpc;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ProbeRequest;
import csi.v1.Csi.Topology;
import csi.v1.Csi.VolumeCapability;
import csi.v1.IdentityGrpc;
import csi.v1.NodeGrpc;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.io.File;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * controller-server and node-servers started from the built jars as local processes, each with
 * its own socket and pool under one work directory; shared by the demo and the benchmark.
 */
final class LocalCluster implements AutoCloseable {

    static final String TOPOLOGY_KEY = "topology.strata.csi.dev/node";

    /** Netty warns on every unix-socket connection that SO_KEEPALIVE does not apply; held so the level sticks. */
    private static final java.util.logging.Logger NETTY_BOOTSTRAP =
            java.util.logging.Logger.getLogger("io.grpc.netty.shaded.io.netty.bootstrap");

    /**
     * How the servers' JVMs start: with an options file (deploy/jvm.options as deployed) and, on
     * JDK 25 and later, each program's AOT cache from {@code aotDir} when one is there
     * ({@code <program>.aot}, made by hack/aot-cache.sh: classes loaded and linked, and profiles,
     * from a training run). {@code training} writes the caches instead, when the JVM exits.
     */
    record Jvm(Path options, Path aotDir, boolean training) {

        /** deploy/jvm.options and the caches hack/aot-cache.sh trains, in target/aot. */
        static Jvm deployed(Path repo) {
            return new Jvm(repo.resolve("deploy/jvm.options"), repo.resolve("target/aot"), false);
        }

        static boolean aotSupported() {
            return Runtime.version().feature() >= 25;
        }

        List<String> command(Path repo, String program) {
            List<String> command = new ArrayList<>(List.of(
                    Path.of(System.getProperty("java.home"), "bin", "java").toString(), "@" + options));
            if (aotDir != null && aotSupported()) {
                Path cache = aotDir.resolve(program + ".aot");
                if (training) {
                    command.add("-XX:AOTCacheOutput=" + cache);
                } else if (Files.exists(cache)) {
                    command.add("-XX:AOTCache=" + cache);
                }
            }
            command.addAll(List.of("-jar", repo.resolve(program + "/target/" + program + ".jar").toString()));
            return command;
        }

        @Override
        public String toString() {
            return options.getFileName() + (aotDir != null && Files.isDirectory(aotDir) && aotSupported() ? " + AOT cache" : "");
        }
    }

    final Path work;
    private final Path repo;
    private final Jvm jvm;
    private final List<String> nodeIds;
    private final PoolSetup pools;
    /** Flags every node-server gets beside its own (a volume group to use, say). */
    private final List<String> nodeFlags;
    /** How long a server may take to start and a node agent to register: 30 s, or STRATA_TEST_START_SECONDS (an emulated VM). */
    private final long startNanos = TimeUnit.SECONDS.toNanos(
            Long.parseLong(System.getenv().getOrDefault("STRATA_TEST_START_SECONDS", "30")));
    private final java.util.Map<String, Process> servers = new java.util.LinkedHashMap<>();
    private final java.util.Map<String, Long> execToReadyMillis = new java.util.HashMap<>();
    private final MultiThreadIoEventLoopGroup clientLoop = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());

    private LocalCluster(Path repo, Jvm jvm, Path work, List<String> nodeIds, PoolSetup pools, List<String> nodeFlags) {
        this.pools = pools;
        this.nodeFlags = nodeFlags;
        this.repo = repo;
        this.jvm = jvm;
        this.work = work;
        this.nodeIds = nodeIds;
    }

    /** Prepares a node's pool directory before its node-server starts (a filesystem mounted there, say). */
    @FunctionalInterface
    interface PoolSetup {
        void prepare(String nodeId, Path pool) throws Exception;
    }

    /** Starts the servers and waits until every node agent has registered with the controller. */
    static LocalCluster start(Path repo, String... nodeIds) throws Exception {
        return start(repo, Jvm.deployed(repo), nodeIds);
    }

    /** Starts the servers in JVMs started as {@code jvm} says. */
    static LocalCluster start(Path repo, Jvm jvm, String... nodeIds) throws Exception {
        return start(repo, jvm, (nodeId, pool) -> { }, nodeIds);
    }

    /** Starts the servers, each node's pool prepared by {@code pools} first. */
    static LocalCluster start(Path repo, Jvm jvm, PoolSetup pools, String... nodeIds) throws Exception {
        return start(repo, jvm, pools, List.of(), nodeIds);
    }

    /** Starts the servers, each node's pool prepared by {@code pools} first, every node-server with {@code nodeFlags} too. */
    static LocalCluster start(Path repo, Jvm jvm, PoolSetup pools, List<String> nodeFlags, String... nodeIds) throws Exception {
        NETTY_BOOTSTRAP.setLevel(java.util.logging.Level.SEVERE);
        LocalCluster cluster = new LocalCluster(repo, jvm, Files.createTempDirectory("strata-"), List.of(nodeIds), pools, nodeFlags);
        try {
            cluster.startServers();
            return cluster;
        } catch (Exception e) {
            cluster.close();
            throw e;
        }
    }

    private void startServers() throws Exception {
        Path token = Files.writeString(work.resolve("agent-token"), "local-token-" + System.nanoTime());
        int registryPort;
        try (ServerSocket free = new ServerSocket(0)) {
            registryPort = free.getLocalPort();
        }
        // One after the other, each until its Probe says ready: what a start costs, without the other's start beside it.
        List<String> controllerFlags = new ArrayList<>(List.of("--endpoint", "unix://" + socket("controller"),
                "--agent-token-file", token.toString(), "--agent-registry-address", "127.0.0.1:" + registryPort,
                "--agent-renew-interval", System.getenv().getOrDefault("STRATA_AGENT_RENEW_INTERVAL", "1s"),
                "--agent-settle-time", "0s", "--agent-plaintext", "true"));
        // Under emulation an agent's first calls (a JVM just started, a volume made) outlast the default deadline.
        String callTimeout = System.getenv("STRATA_AGENT_CALL_TIMEOUT");
        if (callTimeout != null) {
            controllerFlags.addAll(List.of("--agent-call-timeout", callTimeout));
        }
        start("controller-server", "controller", controllerFlags.toArray(String[]::new));
        for (String node : nodeIds) {
            pools.prepare(node, Files.createDirectories(pool(node)));
            List<String> flags = new ArrayList<>(List.of("--endpoint", "unix://" + socket(node), "--node-id", node,
                    "--pool-dir", pool(node).toString(), "--kubelet-dir", work.toString(), "--agent-address", "127.0.0.1:0",
                    "--controller-address", "127.0.0.1:" + registryPort, "--agent-token-file", token.toString(),
                    "--agent-plaintext", "true"));
            flags.addAll(nodeFlags);
            start("node-server", node, flags.toArray(String[]::new));
        }
        for (String node : nodeIds) {
            awaitRegistered(node);
        }
    }

    Path socket(String server) {
        return work.resolve(server + "/csi.sock");
    }

    Path pool(String nodeId) {
        return work.resolve(nodeId + "/pool");
    }

    ControllerGrpc.ControllerBlockingStub controller() {
        return ControllerGrpc.newBlockingStub(channel(socket("controller")));
    }

    csi.v1.SnapshotMetadataGrpc.SnapshotMetadataBlockingStub snapshotMetadata() {
        return csi.v1.SnapshotMetadataGrpc.newBlockingStub(channel(socket("controller")));
    }

    IdentityGrpc.IdentityBlockingStub identity() {
        return IdentityGrpc.newBlockingStub(channel(socket("controller")));
    }

    NodeGrpc.NodeBlockingStub node(String nodeId) {
        return NodeGrpc.newBlockingStub(channel(socket(nodeId)));
    }

    static Topology on(String nodeId) {
        return Topology.newBuilder().putSegments(TOPOLOGY_KEY, nodeId).build();
    }

    static VolumeCapability ext4() {
        return mount("ext4");
    }

    static VolumeCapability mount(String fsType) {
        return VolumeCapability.newBuilder()
                .setMount(VolumeCapability.MountVolume.newBuilder().setFsType(fsType))
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER))
                .build();
    }

    /** SIGTERM to every server, then what is left in the work directory: images, loop devices, mounts, sockets. */
    List<String> stopAndListLeftovers() throws Exception {
        for (Process server : servers.values()) {
            server.toHandle().destroy();
        }
        for (Process server : servers.values()) {
            // A training run writes its AOT cache as it exits: tens of seconds on a busy machine.
            server.waitFor(jvm.training() ? 300 : 60, TimeUnit.SECONDS);
        }
        List<String> left = new ArrayList<>();
        for (String nodeId : nodeIds) {
            try (var files = Files.list(pool(nodeId))) {
                files.filter(f -> !f.getFileName().toString().startsWith(".")).forEach(f -> left.add(f.toString()));
            }
        }
        for (String server : allServers()) {
            if (Files.exists(socket(server))) {
                left.add(socket(server).toString());
            }
        }
        Process losetup = new ProcessBuilder("losetup", "--noheadings", "--raw", "--output", "NAME,BACK-FILE").start();
        new String(losetup.getInputStream().readAllBytes(), StandardCharsets.UTF_8).lines()
                .filter(line -> line.contains(work.toString())).forEach(line -> left.add("loop " + line));
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"))) {
            if (line.contains(work.toString())) {
                left.add("mount " + line.split(" ")[4]);
            }
        }
        return left;
    }

    private List<String> allServers() {
        List<String> all = new ArrayList<>(List.of("controller"));
        all.addAll(nodeIds);
        return all;
    }

    /** Starts {@code program} as {@code server} (its socket's and log's name) and waits until its Probe says ready. */
    private void start(String program, String server, String... flags) throws Exception {
        List<String> command = jvm.command(repo, program);
        command.addAll(List.of(flags));
        File log = work.resolve(server + ".log").toFile();
        long started = System.nanoTime();
        Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log).start();
        servers.put(server, process);
        var probe = IdentityGrpc.newBlockingStub(channel(socket(server)));
        long deadline = started + startNanos;
        while (true) {
            if (!process.isAlive()) {
                throw new IllegalStateException(server + " exited early; see " + log);
            }
            try {
                if (Files.exists(socket(server))
                        && probe.withDeadlineAfter(1, TimeUnit.SECONDS).probe(ProbeRequest.getDefaultInstance()).getReady().getValue()) {
                    execToReadyMillis.put(server, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started));
                    return;
                }
            } catch (io.grpc.StatusRuntimeException notYet) {
                // the socket is there before the server serves on it
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException(server + " not ready within " + TimeUnit.NANOSECONDS.toSeconds(startNanos)
                        + " s; see " + log);
            }
            Thread.sleep(2);
        }
    }

    /** The file of the agent channel's token, which controller-server presents to the agents. */
    Path tokenFile() {
        return work.resolve("agent-token");
    }

    /** The port {@code server} logged it listens on for {@code scheme}: tcp (a node agent) or http (--http-endpoint). */
    int loggedPort(String server, String scheme) throws Exception {
        var pattern = java.util.regex.Pattern.compile("endpoint\"?[=:]\"?" + scheme + "://127\\.0\\.0\\.1:(\\d+)");
        var found = pattern.matcher(Files.readString(work.resolve(server + ".log")));
        if (!found.find()) {
            throw new IllegalStateException(server + " logged no " + scheme + " endpoint; see " + work.resolve(server + ".log"));
        }
        return Integer.parseInt(found.group(1));
    }

    /** How long {@code server} took from exec until its Probe first answered ready. */
    long execToReadyMillis(String server) {
        return execToReadyMillis.get(server);
    }

    long pid(String server) {
        return servers.get(server).pid();
    }

    /** Waits until the controller reports capacity for the node: its agent has registered. */
    private void awaitRegistered(String nodeId) throws Exception {
        long deadline = System.nanoTime() + startNanos;
        while (System.nanoTime() < deadline) {
            try {
                if (controller().getCapacity(GetCapacityRequest.newBuilder().setAccessibleTopology(on(nodeId)).build())
                        .getAvailableCapacity() > 0) {
                    return;
                }
            } catch (io.grpc.StatusRuntimeException e) {
                // UNAVAILABLE: registered, but its lease lapsed before the next renewal (a slow, emulated machine)
                if (e.getStatus().getCode() != io.grpc.Status.Code.UNAVAILABLE) {
                    throw e;
                }
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("node agent " + nodeId + " never registered; see " + work + "/*.log");
    }

    private final java.util.Map<Path, ManagedChannel> channels = new java.util.concurrent.ConcurrentHashMap<>();

    private ManagedChannel channel(Path socket) {
        return channels.computeIfAbsent(socket, s -> NettyChannelBuilder.forAddress(new DomainSocketAddress(s.toFile()))
                .eventLoopGroup(clientLoop)
                .channelType(EpollDomainSocketChannel.class)
                .usePlaintext()
                .build());
    }

    /** Deletes {@code tree} and everything in it: a work directory once nothing is mounted or attached there. */
    static void removeTree(Path tree) throws java.io.IOException {
        try (var paths = Files.walk(tree)) {
            for (Path path : paths.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(path);
            }
        }
    }

    @Override
    public void close() {
        channels.values().forEach(ManagedChannel::shutdownNow);
        servers.values().forEach(Process::destroyForcibly);
        clientLoop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }
}
