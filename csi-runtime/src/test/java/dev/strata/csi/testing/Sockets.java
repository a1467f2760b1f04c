package dev.strata.csi.testing;

import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Path;

/** Client side of the unix sockets the servers listen on. */
public final class Sockets {

    private Sockets() {}

    /** A gRPC channel over a unix socket, as kubelet and the sidecars open one. */
    public static ManagedChannel channel(Path socket) {
        return NettyChannelBuilder.forAddress(new DomainSocketAddress(socket.toFile()))
                .eventLoopGroup(new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory()))
                .channelType(EpollDomainSocketChannel.class)
                .usePlaintext()
                .build();
    }

    /** Leaves a socket file that nobody listens on, as a killed server does. */
    public static void leaveStaleSocket(Path socket) throws IOException {
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(socket));
        }
    }
}
