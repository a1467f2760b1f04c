import com.google.protobuf.Message;
import com.google.protobuf.TextFormat;
import csi.v1.ControllerGrpc;
import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.NodeGetInfoRequest;
import csi.v1.Csi.NodeGetVolumeStatsRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Topology;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
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
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * The main job on an embedded default: controller-server and two node-servers started as local
 * processes, one volume driven through create -> attach -> stage -> publish, a file written and
 * read back through the pod's target path, then every phase undone, each with its latency, and a
 * check that no image, loop device or mount is left. Run through hack/demo.sh, as root.
 */
public final class Demo {

    /** Netty warns on every unix-socket connection that SO_KEEPALIVE does not apply; held so the level sticks. */
    private static final java.util.logging.Logger NETTY_BOOTSTRAP = java.util.logging.Logger.getLogger("io.grpc.netty.shaded.io.netty.bootstrap");
    private static final String TOPOLOGY_KEY = "topology.strata.csi.dev/node";

    private final Path repo;
    private final Path work;
    private final List<Process> servers = new ArrayList<>();
    private final MultiThreadIoEventLoopGroup clientLoop = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());

    private Demo(Path repo, Path work) {
        this.repo = repo;
        this.work = work;
    }

    public static void main(String[] args) throws Exception {
        NETTY_BOOTSTRAP.setLevel(java.util.logging.Level.SEVERE);
        Demo demo = new Demo(Path.of(args[0]), Files.createTempDirectory("strata-demo-"));
        try {
            System.exit(demo.run() ? 0 : 1);
        } finally {
            demo.servers.forEach(Process::destroyForcibly);
            demo.clientLoop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }

    private boolean run() throws Exception {
        Path token = Files.writeString(work.resolve("agent-token"), "demo-token-" + System.nanoTime());
        int registryPort;
        try (ServerSocket free = new ServerSocket(0)) {
            registryPort = free.getLocalPort();
        }
        Path controllerSocket = work.resolve("controller/csi.sock");
        start("controller-server", "controller-server", "--endpoint", "unix://" + controllerSocket,
                "--agent-token-file", token.toString(), "--agent-registry-address", "127.0.0.1:" + registryPort,
                "--agent-renew-interval", "1s");
        for (String node : List.of("node-a", "node-b")) {
            start("node-server", node, "--endpoint", "unix://" + work.resolve(node + "/csi.sock"), "--node-id", node,
                    "--pool-dir", work.resolve(node + "/pool").toString(), "--agent-address", "127.0.0.1:0",
                    "--controller-address", "127.0.0.1:" + registryPort, "--agent-token-file", token.toString());
        }
        awaitSocket(controllerSocket);
        awaitSocket(work.resolve("node-a/csi.sock"));
        awaitSocket(work.resolve("node-b/csi.sock"));
        var controller = ControllerGrpc.newBlockingStub(channel(controllerSocket));
        var node = NodeGrpc.newBlockingStub(channel(work.resolve("node-b/csi.sock")));
        for (String nodeId : List.of("node-a", "node-b")) {
            awaitCapacity(controller, nodeId);
        }
        System.out.printf("work directory %s: controller-server and node-servers node-a, node-b are up%n%n", work);

        System.out.println("Identity and registration (node-driver-registrar, external-provisioner):");
        step("GetPluginInfo", () -> IdentityGrpc.newBlockingStub(channel(controllerSocket)).getPluginInfo(GetPluginInfoRequest.getDefaultInstance()));
        step("NodeGetInfo (node-b)", () -> node.nodeGetInfo(NodeGetInfoRequest.getDefaultInstance()));
        step("GetCapacity (node-b)", () -> controller.getCapacity(GetCapacityRequest.newBuilder().setAccessibleTopology(on("node-b")).build()));

        VolumeCapability capability = VolumeCapability.newBuilder()
                .setMount(VolumeCapability.MountVolume.newBuilder().setFsType("ext4"))
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER))
                .build();
        Path staging = Files.createDirectories(work.resolve("node-b/kubelet/plugins/globalmount"));
        Path target = Files.createDirectories(work.resolve("node-b/kubelet/pods/uid-1/volumes")).resolve("mount");

        System.out.println("\nThe pipeline, as the sidecars and kubelet drive it:");
        Volume volume = ((csi.v1.Csi.CreateVolumeResponse) step("CreateVolume (create)", () -> controller.createVolume(
                CreateVolumeRequest.newBuilder().setName("pvc-demo")
                        .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(64L << 20))
                        .addVolumeCapabilities(capability)
                        .setAccessibilityRequirements(TopologyRequirement.newBuilder()
                                .addPreferred(on("node-b")).addRequisite(on("node-a")).addRequisite(on("node-b")))
                        .build()))).getVolume();
        String id = volume.getVolumeId();
        var publishContext = ((csi.v1.Csi.ControllerPublishVolumeResponse) step("ControllerPublishVolume (attach)",
                () -> controller.controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                        .setVolumeId(id).setNodeId("node-b").setVolumeCapability(capability).build()))).getPublishContextMap();
        step("NodeStageVolume (stage)", () -> node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(id)
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).putAllPublishContext(publishContext).build()));
        step("NodePublishVolume (publish)", () -> node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(id)
                .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability).build()));

        String text = "hello from the pod, " + java.time.Instant.now();
        Files.writeString(target.resolve("hello.txt"), text);
        String back = Files.readString(target.resolve("hello.txt"));
        System.out.printf("  %-34s %s%n", "write + read through target path", back.equals(text) ? "ok: \"" + back + "\"" : "MISMATCH");
        step("NodeGetVolumeStats", () -> node.nodeGetVolumeStats(NodeGetVolumeStatsRequest.newBuilder()
                .setVolumeId(id).setVolumePath(target.toString()).build()));

        System.out.println("\nAnd back:");
        step("NodeUnpublishVolume", () -> node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder()
                .setVolumeId(id).setTargetPath(target.toString()).build()));
        step("NodeUnstageVolume", () -> node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder()
                .setVolumeId(id).setStagingTargetPath(staging.toString()).build()));
        step("ControllerUnpublishVolume (detach)", () -> controller.controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(id).setNodeId("node-b").build()));
        step("DeleteVolume", () -> controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(id).build()));

        for (Process server : servers) {
            server.toHandle().destroy();
        }
        for (Process server : servers) {
            server.waitFor(60, TimeUnit.SECONDS);
        }
        List<String> left = leftovers();
        System.out.printf("%nleft behind (images, loop devices, mounts, sockets): %s%n", left.isEmpty() ? "nothing" : left);
        System.out.println("server logs: " + work + "/*.log");
        return back.equals(text) && left.isEmpty();
    }

    private void start(String program, String logName, String... flags) throws Exception {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED",
                "-jar", repo.resolve(program + "/target/" + program + ".jar").toString()));
        command.addAll(List.of(flags));
        File log = work.resolve(logName + ".log").toFile();
        servers.add(new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log).start());
    }

    private void awaitSocket(Path socket) throws Exception {
        for (int i = 0; i < 600 && !Files.exists(socket); i++) {
            for (Process server : servers) {
                if (!server.isAlive()) {
                    throw new IllegalStateException("a server exited early; see " + work + "/*.log");
                }
            }
            Thread.sleep(50);
        }
    }

    /** Waits until the controller has heard from the node's agent. */
    private static void awaitCapacity(ControllerGrpc.ControllerBlockingStub controller, String nodeId) throws Exception {
        for (int i = 0; i < 300; i++) {
            if (controller.getCapacity(GetCapacityRequest.newBuilder().setAccessibleTopology(on(nodeId)).build()).getAvailableCapacity() > 0) {
                return;
            }
            Thread.sleep(100);
        }
        throw new IllegalStateException("node agent " + nodeId + " never registered");
    }

    private List<String> leftovers() throws Exception {
        List<String> left = new ArrayList<>();
        for (String nodeId : List.of("node-a", "node-b")) {
            try (var files = Files.list(work.resolve(nodeId + "/pool"))) {
                files.filter(f -> !f.getFileName().toString().startsWith(".")).forEach(f -> left.add(f.toString()));
            }
            if (Files.exists(work.resolve(nodeId + "/csi.sock"))) {
                left.add(work.resolve(nodeId + "/csi.sock").toString());
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

    private static Topology on(String nodeId) {
        return Topology.newBuilder().putSegments(TOPOLOGY_KEY, nodeId).build();
    }

    private ManagedChannel channel(Path socket) {
        return NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toFile()))
                .eventLoopGroup(clientLoop)
                .channelType(EpollDomainSocketChannel.class)
                .usePlaintext()
                .build();
    }

    private static Message step(String rpc, Callable<? extends Message> call) throws Exception {
        long start = System.nanoTime();
        Message reply = call.call();
        double millis = (System.nanoTime() - start) / 1e6;
        String shown = TextFormat.printer().shortDebugString(reply);
        System.out.printf("  %-34s %8.2f ms  %s%n", rpc, millis, shown.isEmpty() ? "(empty)" : shown);
        return reply;
    }
}
