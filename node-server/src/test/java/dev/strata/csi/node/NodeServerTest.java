package dev.strata.csi.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.GetPluginCapabilitiesRequest;
import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.NodeGetCapabilitiesRequest;
import csi.v1.Csi.NodeGetInfoRequest;
import csi.v1.Csi.NodeGetInfoResponse;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.ProbeRequest;
import csi.v1.IdentityGrpc;
import csi.v1.NodeGrpc;
import dev.strata.csi.identity.PluginInfo;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** node-server as a real process, called over its unix socket. */
class NodeServerTest {

    @TempDir
    Path dir;

    private ServerProcess server;
    private ManagedChannel channel;

    private void start(Map<String, String> env, String... args) throws Exception {
        Path socket = dir.resolve("node.sock");
        Map<String, String> withEndpoint = new java.util.HashMap<>(env);
        withEndpoint.put("CSI_ENDPOINT", "unix://" + socket);
        server = ServerProcess.start(NodeServer.class, withEndpoint, args).awaitListening(socket);
        channel = Sockets.channel(socket);
    }

    @AfterEach
    void stop() throws Exception {
        if (channel != null) {
            channel.shutdownNow();
        }
        if (server != null) {
            server.close();
        }
    }

    @Test
    void nodeIdComesFromTheDownwardApiVariable() throws Exception {
        start(Map.of("NODE_ID", "worker-3"));
        NodeGetInfoResponse info = NodeGrpc.newBlockingStub(channel).nodeGetInfo(NodeGetInfoRequest.getDefaultInstance());
        assertEquals("worker-3", info.getNodeId());
    }

    @Test
    void identityAndNodeServiceAnswer() throws Exception {
        start(Map.of(), "--node-id", "worker-1");
        var identity = IdentityGrpc.newBlockingStub(channel);
        assertEquals(PluginInfo.DEFAULT_NAME, identity.getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName());
        assertEquals(0, identity.getPluginCapabilities(GetPluginCapabilitiesRequest.getDefaultInstance()).getCapabilitiesCount(),
                "node-server serves no controller service");
        assertTrue(identity.probe(ProbeRequest.getDefaultInstance()).getReady().getValue());
        var node = NodeGrpc.newBlockingStub(channel);
        assertEquals("worker-1", node.nodeGetInfo(NodeGetInfoRequest.getDefaultInstance()).getNodeId());
        assertEquals(0, node.nodeGetCapabilities(NodeGetCapabilitiesRequest.getDefaultInstance()).getCapabilitiesCount());
    }

    @Test
    void missingNodeIdIsAUsageError() throws Exception {
        try (ServerProcess noId = ServerProcess.start(NodeServer.class, "--endpoint", "unix://" + dir.resolve("x.sock"))) {
            assertEquals(2, noId.exitCode());
            assertEquals("node-server: flag --node-id is required (or set NODE_ID) (see --help)", noId.output().strip());
        }
    }

    @Test
    void overlongNodeIdIsAUsageError() throws Exception {
        try (ServerProcess longId = ServerProcess.start(NodeServer.class,
                "--endpoint", "unix://" + dir.resolve("x.sock"), "--node-id", "n".repeat(257))) {
            assertEquals(2, longId.exitCode());
            assertTrue(longId.output().contains("longer than the 256 bytes"), longId.output());
        }
    }

    @Test
    void stageSecretsNeverReachTheLog() throws Exception {
        start(Map.of(), "--node-id", "worker-1", "--v", "5");
        assertThrows(RuntimeException.class, () -> NodeGrpc.newBlockingStub(channel).nodeStageVolume(
                NodeStageVolumeRequest.newBuilder()
                        .setVolumeId("vol-51a9")
                        .setStagingTargetPath("/var/lib/kubelet/plugins/x/globalmount")
                        .putSecrets("password", "pa55-1e0b")
                        .build()));
        server.awaitOutput("code=UNIMPLEMENTED");
        String log = server.output();
        assertTrue(log.contains("volume_id=vol-51a9"), log);
        assertTrue(log.contains("globalmount"), "the request body is logged at --v=5:\n" + log);
        assertFalse(log.contains("pa55-1e0b"), log);
        assertFalse(log.contains("password"), log);
    }
}
