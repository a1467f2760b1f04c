package dev.strata.csi.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.ProbeRequest;
import csi.v1.IdentityGrpc;
import dev.strata.csi.metrics.StatusCodes;
import dev.strata.csi.testing.Exposition;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.SlowProbeDriver;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** --http-endpoint on the server runtime both servers share, as a real process. */
@Tag("root")
class HttpEndpointTest {

    @TempDir
    Path dir;

    @Test
    void healthzIs503UntilTheServerIsReadyThen200AndMetricsCountTheCalls() throws Exception {
        Path socket = dir.resolve("csi.sock");
        Path gate = dir.resolve("gate");
        String address = "127.0.0.1:" + freePort();
        try (ServerProcess server = ServerProcess.start(SlowProbeDriver.class, "--endpoint", "unix://" + socket,
                "--http-endpoint", address, "--start-gate", gate.toString())) {
            Optional<Integer> first = awaitAnswer(address, server);
            assertEquals(Optional.of(503), first, "not ready while its components start");
            Thread.sleep(200);
            assertEquals(Optional.of(503), Exposition.healthz(address), "still starting");
            assertTrue(Files.notExists(socket), "the CSI socket opens after the components");

            Files.createFile(gate);
            server.awaitListening(socket);
            assertEquals(Optional.of(200), Exposition.healthz(address));

            ManagedChannel channel = Sockets.channel(socket);
            try {
                IdentityGrpc.IdentityBlockingStub identity = IdentityGrpc.newBlockingStub(channel);
                identity.probe(ProbeRequest.getDefaultInstance());
                identity.probe(ProbeRequest.getDefaultInstance());
                identity.getPluginInfo(GetPluginInfoRequest.getDefaultInstance());
            } finally {
                channel.shutdownNow();
            }
            Exposition metrics = Exposition.scrape(address);
            assertEquals("histogram", metrics.types().get("csi_plugin_operations_seconds"));
            Map<String, String> probes = Map.of("driver_name", "strata.csi.dev",
                    "method_name", "/csi.v1.Identity/Probe", "grpc_status_code", "OK");
            assertEquals(2, metrics.value("csi_plugin_operations_seconds_count", probes));
            assertEquals(1, metrics.value("csi_plugin_operations_seconds_count", Map.of("driver_name", "strata.csi.dev",
                    "method_name", "/csi.v1.Identity/GetPluginInfo", "grpc_status_code", "OK")));
            List<String> bounds = metrics.bounds("csi_plugin_operations_seconds", probes);
            assertEquals("0.001", bounds.getFirst(), "millisecond buckets: " + bounds);
            assertTrue(bounds.contains("0.005") && bounds.contains("0.05") && bounds.contains("600.0") && bounds.getLast().equals("+Inf"),
                    bounds.toString());
            assertTrue(metrics.value("csi_plugin_operations_seconds_sum", probes) > 0);
        }
    }

    @Test
    void statusCodesAreNamedAsGoNamesThem() {
        assertEquals("OK", StatusCodes.goName(Status.Code.OK));
        assertEquals("InvalidArgument", StatusCodes.goName(Status.Code.INVALID_ARGUMENT));
        assertEquals("FailedPrecondition", StatusCodes.goName(Status.Code.FAILED_PRECONDITION));
        assertEquals("Canceled", StatusCodes.goName(Status.Code.CANCELLED));
        assertEquals("DeadlineExceeded", StatusCodes.goName(Status.Code.DEADLINE_EXCEEDED));
        assertEquals("Unauthenticated", StatusCodes.goName(Status.Code.UNAUTHENTICATED));
    }

    @Test
    void aTakenPortFailsTheStartWithTheReason() throws Exception {
        try (ServerSocket taken = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress());
                ServerProcess server = ServerProcess.start(SlowProbeDriver.class, "--endpoint", "unix://" + dir.resolve("csi.sock"),
                        "--http-endpoint", "127.0.0.1:" + taken.getLocalPort())) {
            assertEquals(1, server.exitCode(), server.output());
            assertTrue(server.output().contains("cannot listen on http://127.0.0.1:" + taken.getLocalPort()), server.output());
        }
    }

    /** The first answer of /healthz once the port opens. */
    private static Optional<Integer> awaitAnswer(String address, ServerProcess server) throws InterruptedException {
        for (int i = 0; i < 1500; i++) {
            Optional<Integer> code = Exposition.healthz(address);
            if (code.isPresent()) {
                return code;
            }
            if (!server.isAlive()) {
                throw new AssertionError("server exited:\n" + server.output());
            }
            Thread.sleep(20);
        }
        throw new AssertionError("nothing listened on " + address + ":\n" + server.output());
    }

    static int freePort() throws java.io.IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }
}
