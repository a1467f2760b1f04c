package dev.strata.csi.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.ProbeRequest;
import csi.v1.Csi.ProbeResponse;
import csi.v1.IdentityGrpc;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.SlowProbeDriver;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The server runtime as a real process on a real unix socket. */
@Tag("root")
class ServerLifecycleTest {

    @TempDir
    Path dir;

    @Test
    void socketIsOnlyReachableByOwnerAndGroup() throws Exception {
        Path socket = dir.resolve("csi.sock");
        try (ServerProcess server = ServerProcess.start(SlowProbeDriver.class, "--endpoint", "unix://" + socket)) {
            server.awaitListening(socket);
            Set<PosixFilePermission> mode = Files.getPosixFilePermissions(socket, LinkOption.NOFOLLOW_LINKS);
            assertEquals(EnumSet.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE,
                    PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE), mode);
        }
    }

    @Test
    void secondServerOnTheSameSocketIsRefusedAndTheFirstKeepsServing() throws Exception {
        Path socket = dir.resolve("csi.sock");
        try (ServerProcess first = ServerProcess.start(SlowProbeDriver.class, "--endpoint", "unix://" + socket)) {
            first.awaitListening(socket);
            try (ServerProcess second = ServerProcess.start(SlowProbeDriver.class, "--endpoint", "unix://" + socket)) {
                assertEquals(1, second.exitCode(), second.output());
                assertTrue(second.output().contains("refusing to take over " + socket), second.output());
            }
            assertTrue(Files.exists(socket, LinkOption.NOFOLLOW_LINKS));
            assertEquals("strata.csi.dev", pluginName(socket));
        }
    }

    @Test
    void staleSocketFromACrashedRunIsReplaced() throws Exception {
        Path socket = dir.resolve("csi.sock");
        Sockets.leaveStaleSocket(socket);
        assertTrue(Files.exists(socket, LinkOption.NOFOLLOW_LINKS));
        try (ServerProcess server = ServerProcess.start(SlowProbeDriver.class, "--endpoint", "unix://" + socket)) {
            server.awaitListening(socket);
            assertTrue(server.output().contains("removed stale socket"), server.output());
            assertEquals("strata.csi.dev", pluginName(socket));
        }
    }

    @Test
    void socketOfAKilledServerIsReplacedByTheNextStart() throws Exception {
        Path socket = dir.resolve("csi.sock");
        try (ServerProcess killed = ServerProcess.start(SlowProbeDriver.class, "--endpoint", "unix://" + socket)) {
            killed.awaitListening(socket);
        } // SIGKILL: no chance to clean up
        assertTrue(Files.exists(socket, LinkOption.NOFOLLOW_LINKS), "a killed server leaves its socket");
        try (ServerProcess next = ServerProcess.start(SlowProbeDriver.class, "--endpoint", "unix://" + socket)) {
            next.awaitListening(socket);
            assertEquals("strata.csi.dev", pluginName(socket));
        }
    }

    @Test
    void pathThatIsNotASocketIsNeverDeleted() throws Exception {
        Path notSocket = dir.resolve("csi.sock");
        Files.writeString(notSocket, "precious");
        try (ServerProcess server = ServerProcess.start(SlowProbeDriver.class, "--endpoint", "unix://" + notSocket)) {
            assertEquals(1, server.exitCode());
            assertTrue(server.output().contains("is not a socket"), server.output());
        }
        assertEquals("precious", Files.readString(notSocket));
    }

    @Test
    void sigtermLetsTheCallInFlightFinishThenRemovesTheSocket() throws Exception {
        Path socket = dir.resolve("csi.sock");
        try (ServerProcess server = ServerProcess.start(SlowProbeDriver.class,
                "--endpoint", "unix://" + socket, "--probe-delay", "2s", "--shutdown-grace", "20s")) {
            server.awaitListening(socket);
            ManagedChannel channel = Sockets.channel(socket);
            try {
                CompletableFuture<ProbeResponse> probe = CompletableFuture.supplyAsync(
                        () -> IdentityGrpc.newBlockingStub(channel).probe(ProbeRequest.getDefaultInstance()));
                server.awaitOutput("probe started");
                server.terminate();
                server.awaitOutput("stopping");
                ProbeResponse response = probe.get(30, TimeUnit.SECONDS);
                assertTrue(response.getReady().getValue(), "the slow call completed normally");
                assertEquals(143, server.exitCode(), "exit status of a process stopped by SIGTERM");
            } finally {
                channel.shutdownNow();
            }
            assertFalse(Files.exists(socket, LinkOption.NOFOLLOW_LINKS), "socket removed:\n" + server.output());
            assertTrue(server.output().contains("msg=stopped"), server.output());
        }
    }

    @Test
    void sigtermCancelsCallsStillRunningAfterTheGracePeriod() throws Exception {
        Path socket = dir.resolve("csi.sock");
        try (ServerProcess server = ServerProcess.start(SlowProbeDriver.class,
                "--endpoint", "unix://" + socket, "--probe-delay", "60s", "--shutdown-grace", "500ms")) {
            server.awaitListening(socket);
            ManagedChannel channel = Sockets.channel(socket);
            try {
                CompletableFuture<ProbeResponse> probe = CompletableFuture.supplyAsync(
                        () -> IdentityGrpc.newBlockingStub(channel).probe(ProbeRequest.getDefaultInstance()));
                server.awaitOutput("probe started");
                server.terminate();
                assertEquals(143, server.exitCode());
                Throwable failure = org.junit.jupiter.api.Assertions.assertThrows(
                        java.util.concurrent.ExecutionException.class, () -> probe.get(30, TimeUnit.SECONDS)).getCause();
                assertTrue(failure instanceof StatusRuntimeException, String.valueOf(failure));
            } finally {
                channel.shutdownNow();
            }
            assertTrue(server.output().contains("cancelling them"), server.output());
            assertFalse(Files.exists(socket, LinkOption.NOFOLLOW_LINKS));
        }
    }

    private static String pluginName(Path socket) {
        ManagedChannel channel = Sockets.channel(socket);
        try {
            return IdentityGrpc.newBlockingStub(channel).getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName();
        } finally {
            channel.shutdownNow();
        }
    }
}
