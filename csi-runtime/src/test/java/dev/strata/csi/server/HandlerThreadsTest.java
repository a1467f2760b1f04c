package dev.strata.csi.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.ProbeRequest;
import csi.v1.IdentityGrpc;
import dev.strata.csi.identity.IdentityService;
import dev.strata.csi.identity.PluginInfo;
import dev.strata.csi.log.CallLog;
import dev.strata.csi.log.Log;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Handlers run on platform threads of their own, off the event loop, with their call's context, and never hold up the transport. */
class HandlerThreadsTest {

    @TempDir
    Path dir;

    @Test
    void aHandlerRunsOnAPlatformThreadOfItsOwnWithItsDeadlineWhileOtherCallsAreAnswered() throws Exception {
        CountDownLatch release = new CountDownLatch(1);
        CompletableFuture<String> seen = new CompletableFuture<>();
        IdentityService identity = new IdentityService(new PluginInfo("strata.csi.dev", "test"), List.of(), () -> {
            seen.complete("virtual=" + Thread.currentThread().isVirtual() + " thread=" + Thread.currentThread().getName().replaceAll("[0-9]+$", "") + " deadline=" + (Context.current().getDeadline() != null));
            try {
                return release.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        });
        Log log = new Log(new PrintStream(new ByteArrayOutputStream()), 0);
        GrpcServer server = GrpcServer.onUnixSocket(new Endpoint(dir.resolve("csi.sock")), List.of(identity), List.of(new CallLog(log)), log);
        MultiThreadIoEventLoopGroup loop = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
        ManagedChannel channel = NettyChannelBuilder.forAddress(new DomainSocketAddress(dir.resolve("csi.sock").toFile()))
                .eventLoopGroup(loop).channelType(EpollDomainSocketChannel.class).usePlaintext().build();
        try {
            var slow = CompletableFuture.supplyAsync(() -> IdentityGrpc.newBlockingStub(channel)
                    .withDeadlineAfter(30, TimeUnit.SECONDS).probe(ProbeRequest.getDefaultInstance()).getReady().getValue());
            assertEquals("virtual=false thread=call- deadline=true", seen.get(30, TimeUnit.SECONDS));
            // The probe is still running; another call is answered meanwhile.
            assertEquals("strata.csi.dev", IdentityGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS)
                    .getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName());
            release.countDown();
            assertTrue(slow.get(30, TimeUnit.SECONDS));
        } finally {
            release.countDown();
            channel.shutdownNow();
            loop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
            server.stop(Duration.ofSeconds(5));
        }
    }
}
