import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import csi.v1.Csi.GetPluginCapabilitiesRequest;
import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.NodeGetCapabilitiesRequest;
import csi.v1.Csi.NodeGetInfoRequest;
import csi.v1.Csi.ProbeRequest;
import csi.v1.IdentityGrpc;
import csi.v1.NodeGrpc;
import com.google.protobuf.TextFormat;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * The main job on an embedded default: controller-server and node-server started as local
 * processes on unix sockets, each phase called over gRPC as the sidecars and kubelet call it,
 * with its latency, then both stopped with SIGTERM. Run through hack/demo.sh.
 */
public final class Demo {

    /** Netty warns on every unix-socket connection that SO_KEEPALIVE does not apply; held so the level sticks. */
    private static final java.util.logging.Logger NETTY_BOOTSTRAP = java.util.logging.Logger.getLogger("io.grpc.netty.shaded.io.netty.bootstrap");

    public static void main(String[] args) throws Exception {
        NETTY_BOOTSTRAP.setLevel(java.util.logging.Level.SEVERE);
        Path repo = Path.of(args[0]);
        Path work = Files.createTempDirectory("strata-demo-");
        List<Process> servers = new ArrayList<>();
        MultiThreadIoEventLoopGroup clientLoop = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
        try {
            Path controllerSocket = work.resolve("controller/csi.sock");
            Path nodeSocket = work.resolve("node/csi.sock");
            servers.add(start(repo, "controller-server", work, "--endpoint", "unix://" + controllerSocket));
            servers.add(start(repo, "node-server", work, "--endpoint", "unix://" + nodeSocket, "--node-id", "demo-node-1"));
            awaitSocket(controllerSocket, servers.get(0));
            awaitSocket(nodeSocket, servers.get(1));

            ManagedChannel controller = channel(controllerSocket, clientLoop);
            ManagedChannel node = channel(nodeSocket, clientLoop);
            System.out.println("controller-server (external-provisioner, external-attacher, livenessprobe call it):");
            step("GetPluginInfo", () -> IdentityGrpc.newBlockingStub(controller).getPluginInfo(GetPluginInfoRequest.getDefaultInstance()));
            step("GetPluginCapabilities", () -> IdentityGrpc.newBlockingStub(controller).getPluginCapabilities(GetPluginCapabilitiesRequest.getDefaultInstance()));
            step("Probe", () -> IdentityGrpc.newBlockingStub(controller).probe(ProbeRequest.getDefaultInstance()));
            step("ControllerGetCapabilities", () -> ControllerGrpc.newBlockingStub(controller).controllerGetCapabilities(ControllerGetCapabilitiesRequest.getDefaultInstance()));
            System.out.println("node-server (node-driver-registrar and kubelet call it):");
            step("GetPluginInfo", () -> IdentityGrpc.newBlockingStub(node).getPluginInfo(GetPluginInfoRequest.getDefaultInstance()));
            step("NodeGetInfo", () -> NodeGrpc.newBlockingStub(node).nodeGetInfo(NodeGetInfoRequest.getDefaultInstance()));
            step("NodeGetCapabilities", () -> NodeGrpc.newBlockingStub(node).nodeGetCapabilities(NodeGetCapabilitiesRequest.getDefaultInstance()));
            controller.shutdownNow();
            node.shutdownNow();

            System.out.println("stopping both servers with SIGTERM:");
            for (Process server : servers) {
                server.toHandle().destroy();
            }
            for (Process server : servers) {
                server.waitFor(60, TimeUnit.SECONDS);
            }
            boolean clean = !Files.exists(controllerSocket) && !Files.exists(nodeSocket);
            System.out.printf("  sockets removed: %s%n", clean ? "yes" : "NO");
            System.out.println("server logs: " + work.resolve("*.log"));
            if (!clean) {
                System.exit(1);
            }
        } finally {
            for (Process server : servers) {
                server.destroyForcibly();
            }
            clientLoop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        }
    }

    private static Process start(Path repo, String program, Path work, String... flags) throws Exception {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED",
                "-jar", repo.resolve(program + "/target/" + program + ".jar").toString()));
        command.addAll(List.of(flags));
        File log = work.resolve(program + ".log").toFile();
        return new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log).start();
    }

    private static void awaitSocket(Path socket, Process server) throws Exception {
        for (int i = 0; i < 600 && !Files.exists(socket); i++) {
            if (!server.isAlive()) {
                throw new IllegalStateException("server for " + socket + " exited with " + server.exitValue());
            }
            Thread.sleep(50);
        }
    }

    private static ManagedChannel channel(Path socket, MultiThreadIoEventLoopGroup loop) {
        return NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toFile()))
                .eventLoopGroup(loop)
                .channelType(EpollDomainSocketChannel.class)
                .usePlaintext()
                .build();
    }

    private static void step(String rpc, Callable<com.google.protobuf.Message> call) throws Exception {
        long start = System.nanoTime();
        com.google.protobuf.Message reply = call.call();
        double millis = (System.nanoTime() - start) / 1e6;
        String shown = TextFormat.printer().shortDebugString(reply);
        System.out.printf("  %-26s %8.2f ms  %s%n", rpc, millis, shown.isEmpty() ? "(empty)" : shown);
    }
}
