package dev.strata.csi.e2e;

import dev.strata.csi.testing.SystemState;
import static dev.strata.csi.e2e.VolumeData.sha256;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.Volume;
import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SecretVolume;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The agent channel over TLS, with credentials made by hack/agent-credentials.sh as a user would. */
@Tag("root")
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
        try (Cluster cluster = Cluster.startWithTls(dir.resolve("cluster"), credentials, List.of(), Map.of(), "node-a")) {
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

    /**
     * Renewed Secrets (both pairs, hack/agent-credentials.sh --renew), replaced as kubelet replaces a
     * Secret volume's files (a new directory, then the ..data link swapped in one rename): the next
     * TLS handshake with either server presents its new certificate, with no restart, the agents
     * take the controller's new client certificate, and volumes keep working.
     */
    @Test
    void renewedCertificatesAreServedByTheNextHandshakeWithoutARestart() throws Exception {
        Root.require();
        Path script = Path.of(System.getProperty("user.dir")).getParent().resolve("hack/agent-credentials.sh");
        Path first = dir.resolve("first");
        SystemState.run("bash", script.toString(), first.toString(), "1");
        Path renewed = dir.resolve("renewed");
        SystemState.run("cp", "-r", first.toString(), renewed.toString());
        assertTrue(SystemState.run("bash", script.toString(), "--renew", renewed.toString(), "1").contains("wrote controller/tls.crt"));

        // The two Secrets as mounted, laid out as deploy/credentials (Cluster.startWithTls reads them there).
        Path secrets = dir.resolve("secrets");
        publish(secrets, first, "..2026_11_23_first");
        Files.copy(first.resolve("ca.crt"), secrets.resolve("ca.crt"));
        try (Cluster cluster = Cluster.startWithTls(dir.resolve("cluster"), secrets, List.of(), Map.of(), "node-a")) {
            int agentPort = cluster.agentPort("node-a");
            assertEquals(fingerprint(first.resolve("controller/tls.crt")), presented(cluster.registryPort()));
            assertEquals(fingerprint(first.resolve("node/tls.crt")), presented(agentPort));

            publish(secrets, renewed, "..2026_11_23_renewed");
            assertEquals(fingerprint(renewed.resolve("controller/tls.crt")), presented(cluster.registryPort()), "controller-server");
            assertEquals(fingerprint(renewed.resolve("node/tls.crt")), presented(agentPort), "node-server's agent");
            cluster.controllerProcess().awaitOutput("agent TLS certificate reloaded");
            cluster.node("node-a").process().awaitOutput("agent TLS certificate reloaded");

            // Files caught mid-replacement (a key of another certificate) are not served: the previous pair stays.
            Path mismatched = dir.resolve("mismatched");
            SystemState.run("cp", "-r", renewed.toString(), mismatched.toString());
            Files.copy(first.resolve("node/tls.key"), mismatched.resolve("node/tls.key"), StandardCopyOption.REPLACE_EXISTING);
            publish(secrets, mismatched, "..2026_11_23_mismatched");
            assertEquals(fingerprint(renewed.resolve("node/tls.crt")), presented(agentPort));
            cluster.node("node-a").process().awaitOutput("cannot be used; serving the previous ones");

            PipelineTest.cluster = cluster;
            Volume volume = PipelineTest.create("pvc-renewed", 8 << 20, PipelineTest.mount("ext4"), "node-a");
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        } finally {
            PipelineTest.cluster = null;
            assertEquals(List.of(), SystemState.cleanUp(dir));
        }
    }

    /** Publishes the controller's and the node's Secret from {@code credentials}, at {@code secrets}/controller and /node. */
    static void publish(Path secrets, Path credentials, String version) throws Exception {
        for (String pair : List.of("controller", "node")) {
            SecretVolume.publish(secrets.resolve(pair), SecretVolume.agentCredentials(credentials, pair), version);
        }
    }

    /** The SHA-256 of the certificate a new TLS handshake with 127.0.0.1:port presents (trusting anything: only to look). */
    static String presented(int port) throws Exception {
        javax.net.ssl.SSLContext context = javax.net.ssl.SSLContext.getInstance("TLS");
        context.init(null, new javax.net.ssl.TrustManager[] {new javax.net.ssl.X509TrustManager() {
            public void checkClientTrusted(java.security.cert.X509Certificate[] chain, String type) {}
            public void checkServerTrusted(java.security.cert.X509Certificate[] chain, String type) {}
            public java.security.cert.X509Certificate[] getAcceptedIssuers() {
                return new java.security.cert.X509Certificate[0];
            }
        }}, null);
        try (javax.net.ssl.SSLSocket socket = (javax.net.ssl.SSLSocket) context.getSocketFactory().createSocket("127.0.0.1", port)) {
            javax.net.ssl.SSLParameters parameters = socket.getSSLParameters();
            parameters.setApplicationProtocols(new String[] {"h2"});
            socket.setSSLParameters(parameters);
            socket.startHandshake();
            return sha256(socket.getSession().getPeerCertificates()[0].getEncoded());
        }
    }

    static String fingerprint(Path pem) throws Exception {
        try (var in = java.nio.file.Files.newInputStream(pem)) {
            return sha256(java.security.cert.CertificateFactory.getInstance("X.509").generateCertificate(in).getEncoded());
        }
    }
}
