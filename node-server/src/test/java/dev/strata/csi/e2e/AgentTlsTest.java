package dev.strata.csi.e2e;

import dev.strata.csi.testing.SystemState;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.Volume;
import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.testing.Root;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The agent channel over TLS, with credentials made by hack/agent-credentials.sh as a user would. */
class AgentTlsTest {

    @TempDir
    Path dir;

    @Test
    void pipelineWorksOverTlsAndPlaintextClientsAreTurnedAway() throws Exception {
        Root.require();
        Path credentials = dir.resolve("credentials");
        Path script = Path.of(System.getProperty("user.dir")).getParent().resolve("hack/agent-credentials.sh");
        String out = SystemState.run("bash", script.toString(), credentials.toString(), "1");
        assertTrue(out.contains("wrote token"), out);
        List<String> tls = List.of("--agent-tls-cert", credentials.resolve("tls.crt").toString(),
                "--agent-tls-key", credentials.resolve("tls.key").toString(),
                "--agent-tls-ca", credentials.resolve("ca.crt").toString());
        try (Cluster cluster = Cluster.start(dir.resolve("cluster"), tls, "node-a")) {
            PipelineTest.cluster = cluster;
            Volume volume = PipelineTest.create("pvc-tls", 8 << 20, PipelineTest.mount("ext4"), "node-a");
            assertEquals("local/node-a/pvc-tls", volume.getVolumeId(), "controller reached the agent over TLS");
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());

            ManagedChannel plaintext = NettyChannelBuilder.forAddress("127.0.0.1", cluster.registryPort()).usePlaintext().build();
            try {
                StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> AgentRegistryGrpc
                        .newBlockingStub(plaintext).withDeadlineAfter(10, TimeUnit.SECONDS)
                        .register(RegisterRequest.newBuilder().setNodeId("intruder").setAddress("127.0.0.1:1").build()));
                assertEquals(Status.Code.UNAVAILABLE, refused.getStatus().getCode(), refused.getStatus().toString());
            } finally {
                plaintext.shutdownNow();
            }
            assertTrue(!cluster.controllerProcess().output().contains("node=intruder"));
        } finally {
            PipelineTest.cluster = null;
            assertEquals(List.of(), SystemState.cleanUp(dir));
        }
    }
}
