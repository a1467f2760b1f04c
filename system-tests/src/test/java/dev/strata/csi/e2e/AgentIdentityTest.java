package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.Volume;
import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.auth.AgentToken;
import dev.strata.csi.auth.IdentityToken;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestApiServer;
import dev.strata.csi.testing.TestIssuer;
import io.grpc.CallCredentials;
import io.grpc.CompositeCallCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Per-node identity on the agent channel, with ServiceAccount tokens from {@link TestIssuer} (a
 * TEST stand-in for the apiserver, which cannot run here) given to the servers as kubelet gives
 * projected tokens: node A's credentials cannot act as node B, nor call B's agent, and a call
 * without an identity token, or with a token of an earlier pod, is refused. The node-servers run
 * as deployed (--agent-identity-keys=kubernetes, in a container whose pod has its ServiceAccount's
 * files): they read the keys over HTTPS from {@link TestApiServer}, which answers as
 * kube-apiserver does; controller-server, a process on the host here, reads them from a file.
 */
@Tag("root")
class AgentIdentityTest {

    @TempDir
    static Path dir;

    static final TestIssuer ISSUER = new TestIssuer("test-issuer-key");
    static TestApiServer apiServer;
    static Cluster cluster;
    static Path tokenA;
    static Cluster.Launch nodePod;

    static Path token(String name, TestIssuer.Claims claims) throws Exception {
        return Files.writeString(dir.resolve(name + ".token"), ISSUER.token(claims));
    }

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        apiServer = TestApiServer.start(ISSUER, dir.resolve("apiserver"));
        Path keys = ISSUER.writeKeys(dir.resolve("jwks.json"));
        Path controllerToken = token("controller", TestIssuer.Claims.of("strata-csi", "strata-controller", "node-c", "controller-pod"));
        tokenA = token("node-a", TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-a1"));
        Path tokenB = token("node-b", TestIssuer.Claims.of("strata-csi", "strata-node", "node-b", "pod-b1"));
        cluster = Cluster.start(dir.resolve("cluster"), List.of("--agent-plaintext", "true"),
                List.of("--agent-identity-keys", keys.toString(), "--agent-identity-callers", "strata-csi/strata-node",
                        "--agent-identity-token-file", controllerToken.toString()),
                Map.of("AGENT_IDENTITY_CALLERS", "strata-csi/strata-controller"));
        nodePod = Cluster.Launch.CONTAINER.with(apiServer.serviceEnvironment("127.0.0.1")).with("AGENT_IDENTITY_KEYS", "kubernetes")
                .withServiceAccount(apiServer.serviceAccount(dir.resolve("node-service-account"), "strata-csi", "strata-node"));
        cluster.startNode("node-a", nodePod.with("AGENT_IDENTITY_TOKEN_FILE", tokenA.toString()));
        cluster.startNode("node-b", nodePod.with("AGENT_IDENTITY_TOKEN_FILE", tokenB.toString()));
        for (String node : List.of("node-a", "node-b")) {
            cluster.node(node).process().awaitOutput("read the cluster's token signing keys");
        }
        PipelineTest.cluster = cluster;
    }

    @AfterAll
    static void stop() throws Exception {
        PipelineTest.cluster = null;
        if (cluster != null) {
            cluster.close();
        }
        if (apiServer != null) {
            apiServer.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir));
    }

    @Test
    void theNodesReadTheKeysAsKubeApiserverServesThem() {
        List<TestApiServer.Request> requests = apiServer.requests();
        assertTrue(requests.size() >= 2, "each node-server read the keys at start: " + requests);
        assertEquals(List.of(200, 200), requests.subList(0, 2).stream().map(TestApiServer.Request::status).toList(), requests.toString());
        for (TestApiServer.Request request : requests) {
            assertEquals("GET " + TestApiServer.KEYS_PATH + " application/jwk-set+json, application/json;q=0.9",
                    request.method() + " " + request.path() + " " + request.accept());
        }
    }

    /**
     * Issue 25's false lead: a node-server that cannot read the keys (here the apiserver refuses its
     * ServiceAccount token) says so at start and on every call it refuses, never that the caller's
     * token is signed with a key the cluster does not publish.
     */
    @Test
    void aNodeThatCannotReadTheKeysSaysSoAtStartAndOnEveryRefusedCall() throws Exception {
        Path refusedAccount = apiServer.serviceAccount(dir.resolve("refused-service-account"), "strata-csi", "strata-node");
        Files.writeString(refusedAccount.resolve("token"), ISSUER.token(TestIssuer.Claims.of("strata-csi", "strata-node", "n", "p")));
        Path tokenC = token("node-c", TestIssuer.Claims.of("strata-csi", "strata-node", "node-c", "pod-c1"));
        // A cluster of its own: the controller cannot tell what a node whose agent refuses it holds, and would refuse every create.
        try (Cluster refusing = Cluster.start(dir.resolve("cluster-c"), List.of("--agent-plaintext", "true"),
                List.of("--agent-identity-keys", dir.resolve("jwks.json").toString(), "--agent-identity-callers", "strata-csi/strata-node",
                        "--agent-identity-token-file", dir.resolve("controller.token").toString()),
                Map.of("AGENT_IDENTITY_CALLERS", "strata-csi/strata-controller"))) {
            refusing.startNode("node-c", nodePod.with("AGENT_IDENTITY_TOKEN_FILE", tokenC.toString()).withServiceAccount(refusedAccount));
            String cannotRead = "cannot read the cluster's signing keys from " + apiServer.keysUri("127.0.0.1") + ": HTTP 401 Unauthorized";
            refusing.node("node-c").process().awaitOutput(cannotRead);

            PipelineTest.cluster = refusing;
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
                    () -> PipelineTest.create("pvc-unread-keys", 8 << 20, PipelineTest.mount("ext4"), "node-c"));
            assertTrue(String.valueOf(e.getStatus().getDescription()).contains(cannotRead), e.getStatus().toString());
            String log = refusing.node("node-c").process().output();
            List<String> refusals = log.lines().filter(line -> line.contains("refused a call on the agent channel")).toList();
            assertTrue(!refusals.isEmpty() && refusals.stream().allMatch(line -> line.contains(cannotRead)), log);
            assertFalse(log.contains("not among the keys") || log.contains("does not publish"), log);
            assertFalse(Files.exists(refusing.node("node-c").pool().resolve("pvc-unread-keys.img")), "nothing made on node-c");
        } finally {
            PipelineTest.cluster = cluster;
        }
    }

    /** What a node holding the shared token and {@code identity} can send. */
    static CallCredentials holding(Path identity) throws Exception {
        CallCredentials shared = AgentToken.fromFile(cluster.tokenFile()).credentials();
        return identity == null ? shared : new CompositeCallCredentials(shared, new IdentityToken(identity).credentials());
    }

    static Status.Code register(String nodeId, CallCredentials credentials) {
        ManagedChannel channel = NettyChannelBuilder.forAddress("127.0.0.1", cluster.registryPort()).usePlaintext().build();
        try {
            AgentRegistryGrpc.newBlockingStub(channel).withCallCredentials(credentials).withDeadlineAfter(20, TimeUnit.SECONDS)
                    .register(RegisterRequest.newBuilder().setNodeId(nodeId).setAddress("127.0.0.1:1").build());
            return Status.Code.OK;
        } catch (StatusRuntimeException e) {
            return e.getStatus().getCode();
        } finally {
            channel.shutdownNow();
        }
    }

    @Test
    void nodesAndControllerWorkTogetherAndNodeACannotActAsNodeB() throws Exception {
        Volume volume = PipelineTest.create("pvc-identity", 8 << 20, PipelineTest.mount("ext4"), "node-b");
        assertEquals("local/node-b/pvc-identity", volume.getVolumeId(), "the agent of node-b took the controller's call");
        Path image = cluster.node("node-b").pool().resolve("pvc-identity.img");
        assertTrue(Files.exists(image));

        assertEquals(Status.Code.PERMISSION_DENIED, register("node-b", holding(tokenA)), "node-a's token registers node-a only");
        cluster.controllerProcess().awaitOutput("refused a registration for another node");

        ManagedChannel agentB = NettyChannelBuilder.forAddress("127.0.0.1", cluster.agentPort("node-b")).usePlaintext().build();
        try {
            for (Path identity : new Path[] {tokenA, null}) {
                StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> NodeAgentGrpc.newBlockingStub(agentB)
                        .withCallCredentials(holding(identity)).withDeadlineAfter(20, TimeUnit.SECONDS)
                        .deleteVolume(dev.strata.csi.agent.api.DeleteVolumeRequest.newBuilder().setName("pvc-identity").build()));
                assertEquals(Status.Code.UNAUTHENTICATED, e.getStatus().getCode(), String.valueOf(identity));
            }
        } finally {
            agentB.shutdownNow();
        }
        assertTrue(Files.exists(image), "node-b's image is still there");

        // The controller still sends node-b's calls to node-b's agent.
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        assertTrue(Files.notExists(image));
    }

    @Test
    void callsWithoutAnIdentityOrWithAnEarlierPodsTokenAreRefused() throws Exception {
        assertEquals(Status.Code.UNAUTHENTICATED, register("node-a", holding(null)), "the shared token alone is not enough");
        Path earlierPod = token("node-a-earlier-pod", TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-a0")
                .issued(Instant.now().minus(Duration.ofMinutes(10))));
        assertEquals(Status.Code.UNAUTHENTICATED, register("node-a", holding(earlierPod)),
                "a token of the node-server before the one registered now is a replay");
        Path expired = token("node-a-expired", TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-a1")
                .issued(Instant.now().minus(Duration.ofHours(3))));
        assertEquals(Status.Code.UNAUTHENTICATED, register("node-a", holding(expired)));
        Path otherAccount = token("default-account", TestIssuer.Claims.of("default", "default", "node-a", "pod-x"));
        assertEquals(Status.Code.UNAUTHENTICATED, register("node-a", holding(otherAccount)), "any pod on node-a is not its agent");
    }

    @Test
    void withoutNodeClaimsTheSharedTokenDecidesWithAWarning() throws Exception {
        Path noClaim = token("node-old", TestIssuer.Claims.of("strata-csi", "strata-node", "node-old", "pod-o1").withoutNode());
        assertEquals(Status.Code.OK, register("node-old", holding(noClaim)));
        cluster.controllerProcess().awaitOutput("carry no node claim"); // the fallback is said in the log
    }
}
