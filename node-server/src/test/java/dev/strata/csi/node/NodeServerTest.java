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
import csi.v1.Csi.PluginCapability;
import csi.v1.Csi.ProbeRequest;
import csi.v1.IdentityGrpc;
import csi.v1.NodeGrpc;
import dev.strata.csi.identity.PluginInfo;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** node-server as a real process, called over its unix socket. */
@Tag("root")
class NodeServerTest {

    @TempDir
    Path dir;

    private ServerProcess server;
    private ManagedChannel channel;

    /** A node-server with its pool in the test directory and no controller to register with. */
    private void start(Map<String, String> env, String... args) throws Exception {
        Path socket = dir.resolve("node.sock");
        Map<String, String> all = new java.util.HashMap<>(env);
        all.put("CSI_ENDPOINT", "unix://" + socket);
        all.put("POOL_DIR", dir.resolve("pool").toString());
        all.put("KUBELET_DIR", dir.toString());
        all.put("CONTROLLER_ADDRESS", "127.0.0.1:1");
        all.put("AGENT_ADDRESS", "127.0.0.1:0");
        all.put("AGENT_PLAINTEXT", "true");
        all.put("AGENT_TOKEN_FILE", java.nio.file.Files.writeString(dir.resolve("token"), "node-test-token-0042").toString());
        server = ServerProcess.start(NodeServer.class, all, args).awaitListening(socket);
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
        assertEquals(List.of(PluginCapability.Service.Type.CONTROLLER_SERVICE, PluginCapability.Service.Type.GROUP_CONTROLLER_SERVICE,
                PluginCapability.Service.Type.VOLUME_ACCESSIBILITY_CONSTRAINTS),
                identity.getPluginCapabilities(GetPluginCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList()
                        .stream().filter(PluginCapability::hasService).map(c -> c.getService().getType()).toList(),
                "the plugin's capabilities, as the controller reports them");
        assertTrue(identity.probe(ProbeRequest.getDefaultInstance()).getReady().getValue());
        var node = NodeGrpc.newBlockingStub(channel);
        NodeGetInfoResponse info = node.nodeGetInfo(NodeGetInfoRequest.getDefaultInstance());
        assertEquals("worker-1", info.getNodeId());
        assertEquals(Map.of("topology.strata.csi.dev/node", "worker-1"), info.getAccessibleTopology().getSegmentsMap());
        assertEquals(List.of("STAGE_UNSTAGE_VOLUME", "GET_VOLUME_STATS", "VOLUME_CONDITION", "SINGLE_NODE_MULTI_WRITER", "EXPAND_VOLUME"),
                node.nodeGetCapabilities(NodeGetCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList()
                        .stream().map(c -> c.getRpc().getType().name()).toList());
    }

    @Test
    void missingNodeIdIsAUsageError() throws Exception {
        try (ServerProcess noId = ServerProcess.start(NodeServer.class, "--endpoint", "unix://" + dir.resolve("x.sock"),
                "--controller-address", "127.0.0.1:1", "--agent-token-file", "/nonexistent")) {
            assertEquals(2, noId.exitCode());
            assertEquals("node-server: flag --node-id is required (or set NODE_ID) (see --help)", noId.output().strip());
        }
    }

    @Test
    void anAbandonedCopyExpiryIsADuration() throws Exception {
        try (ServerProcess help = ServerProcess.start(NodeServer.class, "--help")) {
            assertEquals(0, help.exitCode());
            assertTrue(help.output().contains("--abandoned-copy-expiry") && help.output().contains("env ABANDONED_COPY_EXPIRY; default \"1h\""), help.output());
        }
        try (ServerProcess soon = ServerProcess.start(NodeServer.class, "--endpoint", "unix://" + dir.resolve("x.sock"),
                "--node-id", "worker-1", "--abandoned-copy-expiry", "soon", "--pool-dir", dir.resolve("pool").toString(), "--kubelet-dir", dir.toString(),
                "--controller-address", "127.0.0.1:1", "--agent-token-file", "/nonexistent")) {
            assertEquals(2, soon.exitCode());
            assertTrue(soon.output().contains("flag --abandoned-copy-expiry takes a duration such as 1m30s"), soon.output());
        }
    }

    @Test
    void aNodeWithoutAnImagePoolNeedsAVolumeGroup() throws Exception {
        try (ServerProcess help = ServerProcess.start(NodeServer.class, "--help")) {
            assertEquals(0, help.exitCode());
            assertTrue(help.output().contains("--image-pool") && help.output().contains("env IMAGE_POOL; default \"true\""), help.output());
        }
        for (String value : List.of("false", "maybe")) {
            try (ServerProcess none = ServerProcess.start(NodeServer.class, "--endpoint", "unix://" + dir.resolve("x.sock"),
                    "--node-id", "worker-1", "--image-pool=" + value, "--pool-dir", dir.resolve("pool").toString(), "--kubelet-dir", dir.toString(),
                    "--controller-address", "127.0.0.1:1", "--agent-token-file", "/nonexistent")) {
                assertEquals(2, none.exitCode(), none.output());
                assertTrue(none.output().contains(value.equals("false")
                        ? "flag --image-pool=false leaves this node no pool: name an LVM volume group with --volume-group"
                        : "flag --image-pool takes true or false, got 'maybe'"), none.output());
            }
        }
    }

    @Test
    void theCgroupRootIsAnAbsolutePathAndTheResyncADuration() throws Exception {
        try (ServerProcess help = ServerProcess.start(NodeServer.class, "--help")) {
            assertEquals(0, help.exitCode());
            assertTrue(help.output().contains("env CGROUP_ROOT; default \"/sys/fs/cgroup\"")
                    && help.output().contains("env IO_LIMITS_RESYNC; default \"30s\""), help.output());
        }
        try (ServerProcess relative = ServerProcess.start(NodeServer.class, "--endpoint", "unix://" + dir.resolve("x.sock"),
                "--node-id", "worker-1", "--cgroup-root", "sys/fs/cgroup", "--pool-dir", dir.resolve("pool").toString(),
                "--kubelet-dir", dir.toString(), "--controller-address", "127.0.0.1:1", "--agent-token-file", "/nonexistent")) {
            assertEquals(2, relative.exitCode());
            assertTrue(relative.output().contains("flag --cgroup-root must be an absolute path, got 'sys/fs/cgroup'"), relative.output());
        }
        try (ServerProcess often = ServerProcess.start(NodeServer.class, "--endpoint", "unix://" + dir.resolve("x.sock"),
                "--node-id", "worker-1", "--io-limits-resync", "often", "--pool-dir", dir.resolve("pool").toString(), "--kubelet-dir", dir.toString(),
                "--controller-address", "127.0.0.1:1", "--agent-token-file", "/nonexistent")) {
            assertEquals(2, often.exitCode());
            assertTrue(often.output().contains("flag --io-limits-resync takes a duration such as 1m30s"), often.output());
        }
    }

    @Test
    void aCrashPointThatIsNoneIsAUsageError() throws Exception {
        Map<String, String> env = Map.of("STRATA_TEST_CRASH_AT", "NO_SUCH_POINT", "AGENT_PLAINTEXT", "true",
                "AGENT_TOKEN_FILE", java.nio.file.Files.writeString(dir.resolve("token"), "node-test-token-0042").toString());
        try (ServerProcess crashing = ServerProcess.start(NodeServer.class, env, "--endpoint", "unix://" + dir.resolve("x.sock"),
                "--node-id", "worker-1", "--pool-dir", dir.resolve("pool").toString(), "--kubelet-dir", dir.toString(),
                "--controller-address", "127.0.0.1:1")) {
            assertEquals(2, crashing.exitCode());
            assertTrue(crashing.output().contains("STRATA_TEST_CRASH_AT names no crash point"), crashing.output());
        }
    }

    @Test
    void overlongNodeIdIsAUsageError() throws Exception {
        try (ServerProcess longId = ServerProcess.start(NodeServer.class,
                "--endpoint", "unix://" + dir.resolve("x.sock"), "--node-id", "n".repeat(257),
                "--controller-address", "127.0.0.1:1", "--agent-token-file", "/nonexistent")) {
            assertEquals(2, longId.exitCode());
            assertTrue(longId.output().contains("must be a Kubernetes node name"), longId.output());
        }
    }

    @Test
    void stageSecretsNeverReachTheLog() throws Exception {
        start(Map.of(), "--node-id", "worker-1", "--v", "5");
        assertThrows(RuntimeException.class, () -> NodeGrpc.newBlockingStub(channel).nodeStageVolume(
                NodeStageVolumeRequest.newBuilder()
                        .setVolumeId("local/worker-1/vol-51a9")
                        .setStagingTargetPath("/var/lib/kubelet/plugins/x/globalmount")
                        .putSecrets("password", "pa55-1e0b")
                        .build()));
        server.awaitOutput("method=csi.v1.Node/NodeStageVolume volume_id=local/worker-1/vol-51a9");
        String log = server.output();
        assertTrue(log.contains("globalmount"), "the request body is logged at --v=5:\n" + log);
        assertFalse(log.contains("pa55-1e0b"), log);
        assertFalse(log.contains("password"), log);
    }
}
