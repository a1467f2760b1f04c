import com.google.protobuf.BoolValue;
import csi.v1.Csi.ProbeRequest;
import csi.v1.Csi.ProbeResponse;
import csi.v1.IdentityGrpc;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import io.grpc.stub.StreamObserver;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * The floor under both servers, for hack/footprint.sh: the stack they are built on (gRPC over
 * Netty's epoll transport, protobuf, the CSI messages) and nothing of the driver. It serves
 * Identity's Probe on a unix socket and on loopback TCP, as node-server serves CSI and its agent,
 * each server with the same threads GrpcServer gives it, and calls itself once through each, as a
 * server that registers somewhere does. Then it prints "ready" and reads commands on stdin:
 * "work N" makes N Probe calls through each socket and prints "done"; end of input stops it (and
 * writes the AOT cache when started with -XX:AOTCacheOutput).
 * Argument: the unix socket's path.
 */
final class GrpcFloor {

    public static void main(String[] args) throws Exception {
        Path socket = Path.of(args[0]);
        Files.deleteIfExists(socket);
        ExecutorService handlers = Executors.newCachedThreadPool(Thread.ofPlatform().name("call-", 0).daemon().factory());
        IdentityGrpc.AsyncService identity = new IdentityGrpc.AsyncService() {
            @Override
            public void probe(ProbeRequest request, StreamObserver<ProbeResponse> response) {
                response.onNext(ProbeResponse.newBuilder().setReady(BoolValue.of(true)).build());
                response.onCompleted();
            }
        };
        List<EventLoopGroup> loops = List.of(loop(), loop(), loop(), loop(), loop());
        Server unix = NettyServerBuilder.forAddress(new DomainSocketAddress(socket.toFile()))
                .channelType(EpollServerDomainSocketChannel.class).bossEventLoopGroup(loops.get(0))
                .workerEventLoopGroup(loops.get(1)).executor(handlers).addService(IdentityGrpc.bindService(identity)).build().start();
        Server tcp = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                .channelType(EpollServerSocketChannel.class).bossEventLoopGroup(loops.get(2))
                .workerEventLoopGroup(loops.get(3)).executor(handlers).addService(IdentityGrpc.bindService(identity)).build().start();
        List<ManagedChannel> channels = List.of(
                NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toFile())).channelType(EpollDomainSocketChannel.class)
                        .eventLoopGroup(loops.get(4)).usePlaintext().build(),
                NettyChannelBuilder.forAddress("127.0.0.1", tcp.getPort()).channelType(EpollSocketChannel.class)
                        .eventLoopGroup(loops.get(4)).usePlaintext().build());
        probe(channels, 1);
        System.out.println("ready");
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String command = commands.readLine(); command != null; command = commands.readLine()) {
            if (command.startsWith("work ")) {
                probe(channels, Integer.parseInt(command.substring("work ".length())));
                System.out.println("done");
            }
        }
        channels.forEach(ManagedChannel::shutdownNow);
        unix.shutdownNow().awaitTermination();
        tcp.shutdownNow().awaitTermination();
        loops.forEach(loop -> loop.shutdownGracefully(0, 0, TimeUnit.SECONDS).syncUninterruptibly());
        Files.deleteIfExists(socket);
    }

    private static EventLoopGroup loop() {
        return new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
    }

    private static void probe(List<ManagedChannel> channels, int calls) {
        for (ManagedChannel channel : channels) {
            IdentityGrpc.IdentityBlockingStub stub = IdentityGrpc.newBlockingStub(channel);
            for (int i = 0; i < calls; i++) {
                if (!stub.probe(ProbeRequest.getDefaultInstance()).getReady().getValue()) {
                    throw new IllegalStateException("Probe said not ready");
                }
            }
        }
    }
}
