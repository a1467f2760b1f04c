package dev.strata.csi.server;

import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import io.grpc.BindableService;
import io.grpc.Server;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContext;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * A gRPC server on Netty's native epoll transport: on a unix socket for the CSI services, on TCP
 * for the node agent protocol. Each call's handler runs on a platform thread of its own (see
 * {@link HandlerThreads}).
 */
public final class GrpcServer {

    /** Owner and group may connect to a unix socket (kubelet and the sidecars); nobody else. */
    private static final int SOCKET_UMASK = 0117;
    /**
     * The HTTP/2 flow-control window of the agent protocol's TCP connections, both sides (gRPC's
     * default is 1 MiB): a volume's content crosses them in 1 MiB chunks, and with a window of
     * one chunk each hop of a copy stood still until the next hop had taken the last chunk. Four
     * let the sender, controller-server's relay and the receiver work at the same time; it bounds
     * what a stream buffers, and costs nothing while idle (hack/snapshot-bench.sh measures it).
     */
    public static final int TCP_FLOW_CONTROL_WINDOW = 4 << 20;

    private final String where;
    private final Server server;
    private final AutoCloseable claim;
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final ExecutorService handlers;
    private final Log log;

    private GrpcServer(String where, Server server, AutoCloseable claim, EventLoopGroup boss, EventLoopGroup workers,
            ExecutorService handlers, Log log) {
        this.where = where;
        this.server = server;
        this.claim = claim;
        this.boss = boss;
        this.workers = workers;
        this.handlers = handlers;
        this.log = log;
    }

    /**
     * Serves on a unix socket. Interceptors apply in list order, the first outermost.
     */
    public static GrpcServer onUnixSocket(Endpoint endpoint, List<BindableService> services,
            List<ServerInterceptor> interceptors, Log log) throws StartupException {
        SocketClaim claim = SocketClaim.claim(endpoint.socket());
        if (claim.removedStale()) {
            log.info("removed stale socket left by an earlier run", "socket", endpoint.socket());
        }
        NettyServerBuilder builder = NettyServerBuilder.forAddress(new DomainSocketAddress(endpoint.socket().toFile()))
                .channelType(EpollServerDomainSocketChannel.class);
        Kernel kernel = new Kernel();
        // The socket file takes its mode from the umask at bind(); setting it here leaves no
        // moment in which the socket is world-writable.
        int previous = kernel.umask(SOCKET_UMASK);
        try {
            return start(endpoint.toString(), builder, services, interceptors, claim, log);
        } finally {
            kernel.umask(previous);
        }
    }

    /** Serves on a TCP address, with TLS when given (port 0 picks a free port; see {@link #port()}). */
    public static GrpcServer onTcp(InetSocketAddress address, Optional<SslContext> tls, List<BindableService> services,
            List<ServerInterceptor> interceptors, Log log) throws StartupException {
        NettyServerBuilder builder = NettyServerBuilder.forAddress(address).channelType(EpollServerSocketChannel.class)
                .flowControlWindow(TCP_FLOW_CONTROL_WINDOW);
        tls.ifPresent(builder::sslContext);
        return start("tcp://" + address.getHostString() + ":" + address.getPort(), builder, services, interceptors,
                () -> { }, log);
    }

    private static GrpcServer start(String where, NettyServerBuilder builder, List<BindableService> services,
            List<ServerInterceptor> interceptors, AutoCloseable claim, Log log) throws StartupException {
        EventLoopGroup boss = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
        EventLoopGroup workers = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
        // Platform threads, not virtual ones: handlers spend their time in system calls and native
        // libraries (mount, loop ioctls, libblkid), where a virtual thread pins its carrier, so each
        // would need a second hand-over to a platform thread. A CSI server sees tens of concurrent
        // calls at most (external-provisioner's workers); idle threads end after a minute.
        ExecutorService handlers = Executors.newCachedThreadPool(Thread.ofPlatform().name("call-", 0).daemon().factory());
        builder.bossEventLoopGroup(boss).workerEventLoopGroup(workers).directExecutor();
        // ServerInterceptors runs the last one given first. HandlerThreads is outermost, so the
        // handler and every interceptor's part in it run on the handler's thread.
        List<ServerInterceptor> innermostFirst = new ArrayList<>(interceptors.reversed());
        innermostFirst.add(new HandlerThreads(handlers));
        for (BindableService service : services) {
            builder.addService(ServerInterceptors.intercept(service, innermostFirst));
        }
        Server server = builder.build();
        try {
            server.start();
        } catch (IOException e) {
            shutdownQuietly(boss, workers, handlers);
            closeQuietly(claim);
            throw new StartupException("cannot listen on " + where + ": " + e.getMessage(), e);
        }
        GrpcServer started = new GrpcServer(where, server, claim, boss, workers, handlers, log);
        log.info("listening", "endpoint", started.where());
        return started;
    }

    /** Where the server listens, with the real port when port 0 was asked for. */
    public String where() {
        return where.startsWith("tcp://") ? where.substring(0, where.lastIndexOf(':') + 1) + port() : where;
    }

    /** The TCP port, or -1 on a unix socket. */
    public int port() {
        return server.getPort();
    }

    /**
     * Stops taking new calls, lets calls in flight finish for up to {@code grace}, cancels what is
     * left, and removes the socket.
     */
    public void stop(Duration grace) {
        log.info("stopping: no new calls, waiting for calls in flight", "endpoint", where(), "grace", grace);
        server.shutdown();
        try {
            if (!server.awaitTermination(grace.toMillis(), TimeUnit.MILLISECONDS)) {
                log.warn("calls still running after the grace period; cancelling them", "grace", grace);
                server.shutdownNow();
                server.awaitTermination(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            server.shutdownNow();
            Thread.currentThread().interrupt();
        }
        shutdownQuietly(boss, workers, handlers);
        closeQuietly(claim);
        log.info("stopped", "endpoint", where);
    }

    public void awaitTermination() throws InterruptedException {
        server.awaitTermination();
    }

    private static void shutdownQuietly(EventLoopGroup boss, EventLoopGroup workers, ExecutorService handlers) {
        boss.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        workers.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        handlers.shutdown();
    }

    private static void closeQuietly(AutoCloseable claim) {
        try {
            claim.close();
        } catch (Exception ignored) {
            // SocketClaim.close does not throw; nothing else to release
        }
    }
}
