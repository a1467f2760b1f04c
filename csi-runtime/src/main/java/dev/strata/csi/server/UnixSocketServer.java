package dev.strata.csi.server;

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
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import jnr.posix.POSIX;
import jnr.posix.POSIXFactory;

/**
 * A gRPC server on a unix domain socket (Netty's native epoll transport). Handlers run on virtual
 * threads, since most of the driver's work is waiting for the kernel and for tools it runs.
 */
public final class UnixSocketServer {

    /** Owner and group may connect (kubelet and the sidecars); nobody else. */
    private static final int SOCKET_UMASK = 0117;

    private final Endpoint endpoint;
    private final Server server;
    private final SocketClaim claim;
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final ExecutorService handlers;
    private final Log log;

    private UnixSocketServer(Endpoint endpoint, Server server, SocketClaim claim, EventLoopGroup boss,
            EventLoopGroup workers, ExecutorService handlers, Log log) {
        this.endpoint = endpoint;
        this.server = server;
        this.claim = claim;
        this.boss = boss;
        this.workers = workers;
        this.handlers = handlers;
        this.log = log;
    }

    public static UnixSocketServer start(Endpoint endpoint, List<BindableService> services,
            ServerInterceptor interceptor, Log log) throws StartupException {
        SocketClaim claim = SocketClaim.claim(endpoint.socket());
        if (claim.removedStale()) {
            log.info("removed stale socket left by an earlier run", "socket", endpoint.socket());
        }
        EventLoopGroup boss = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
        EventLoopGroup workers = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
        ExecutorService handlers = Executors.newVirtualThreadPerTaskExecutor();
        NettyServerBuilder builder = NettyServerBuilder.forAddress(new DomainSocketAddress(endpoint.socket().toFile()))
                .channelType(EpollServerDomainSocketChannel.class)
                .bossEventLoopGroup(boss)
                .workerEventLoopGroup(workers)
                .executor(handlers);
        for (BindableService service : services) {
            builder.addService(ServerInterceptors.intercept(service, interceptor));
        }
        Server server = builder.build();
        POSIX posix = POSIXFactory.getNativePOSIX();
        // The socket file takes its mode from the umask at bind(); setting it here leaves no
        // moment in which the socket is world-writable.
        int previous = posix.umask(SOCKET_UMASK);
        try {
            server.start();
        } catch (IOException e) {
            shutdownQuietly(boss, workers, handlers);
            claim.close();
            throw new StartupException("cannot listen on " + endpoint + ": " + e.getMessage(), e);
        } finally {
            posix.umask(previous);
        }
        log.info("listening", "endpoint", endpoint);
        return new UnixSocketServer(endpoint, server, claim, boss, workers, handlers, log);
    }

    /**
     * Stops taking new calls, lets calls in flight finish for up to {@code grace}, cancels what is
     * left, and removes the socket.
     */
    public void stop(Duration grace) {
        log.info("stopping: no new calls, waiting for calls in flight", "grace", grace);
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
        claim.close();
        log.info("stopped", "endpoint", endpoint);
    }

    public void awaitTermination() throws InterruptedException {
        server.awaitTermination();
    }

    private static void shutdownQuietly(EventLoopGroup boss, EventLoopGroup workers, ExecutorService handlers) {
        boss.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        workers.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        handlers.shutdown();
    }
}
