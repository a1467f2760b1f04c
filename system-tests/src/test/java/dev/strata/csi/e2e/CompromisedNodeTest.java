package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.Inventory;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.auth.AgentToken;
import dev.strata.csi.auth.IdentityToken;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestApiServer;
import dev.strata.csi.testing.TestIssuer;
import io.grpc.CallOptions;
import io.grpc.ClientCall;
import io.grpc.CompositeCallCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Root on one node (issue 40), played against the programs as they are deployed: the agent
 * channel over TLS with the pairs hack/agent-credentials.sh makes, controller-server in its pod
 * reading the token keys and issuer from {@link TestApiServer} (a TEST stand-in for the
 * apiserver), node-servers presenting tokens of {@link TestIssuer}. node-a is the attacker's: the
 * test runs its agent with node-a's pair and token, and records what controller-server sends it.
 * With all of that (the node pair, node-a's token, the shared token, the headers of the
 * controller's call) no RPC of the NodeAgent service, each taken from its descriptor, gets past
 * the door of node-b's or node-c's agent; controller-server's own calls do; and node-a registers
 * as node-a only.
 */
@Tag("root")
class CompromisedNodeTest {

    @TempDir
    static Path dir;

    static final TestIssuer ISSUER = new TestIssuer("compromised-node-test-key");
    static final List<String> VICTIMS = List.of("node-b", "node-c");
    static final Metadata.Key<String> IDENTITY = Metadata.Key.of("strata-identity", Metadata.ASCII_STRING_MARSHALLER);
    static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

    static TestApiServer apiServer;
    static Cluster.Launch controllerPod;
    static Path credentials;
    static Cluster cluster;
    static Path tokenA;

    static Path token(String name, TestIssuer.Claims claims) throws IOException {
        return Files.writeString(dir.resolve(name + ".token"), ISSUER.token(claims));
    }

    static List<String> controllerFlags(String... more) {
        List<String> flags = new ArrayList<>(List.of("--agent-identity-keys", "kubernetes", "--agent-identity-callers", "strata-csi/strata-node"));
        flags.addAll(List.of(more));
        return flags;
    }

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        credentials = dir.resolve("credentials");
        Path script = Path.of(System.getProperty("user.dir")).getParent().resolve("hack/agent-credentials.sh");
        SystemState.run("bash", script.toString(), credentials.toString(), "1");
        apiServer = TestApiServer.start(ISSUER, dir.resolve("apiserver"));
        controllerPod = Cluster.Launch.HOST.with(apiServer.serviceEnvironment("127.0.0.1"))
                .withServiceAccount(apiServer.serviceAccount(dir.resolve("controller-service-account"), "strata-csi", "strata-controller"));
        tokenA = token("node-a", TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-a1"));
        cluster = Cluster.startWithTls(dir.resolve("cluster"), credentials, controllerPod, controllerFlags(), Map.of());
        for (String node : VICTIMS) {
            cluster.startNode(node, Cluster.Launch.HOST.with("AGENT_IDENTITY_TOKEN_FILE",
                    token(node, TestIssuer.Claims.of("strata-csi", "strata-node", node, "pod-" + node)).toString()));
        }
        cluster.controllerProcess().awaitOutput("read the cluster's token signing keys");
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
    void whatANodeHoldsAndReceivesCallsNoOtherNodesAgentOnAnyRpc() throws Exception {
        Metadata captured = capturedFromTheController();
        assertTrue(captured.containsKey(AUTHORIZATION), "the controller's call carried the shared token: " + captured.keys());
        assertFalse(captured.containsKey(IDENTITY), "the controller sends no identity token to a node: " + captured.keys());

        Metadata ownToken = new Metadata();
        ownToken.put(AUTHORIZATION, "Bearer " + Files.readString(cluster.tokenFile()).strip());
        ownToken.put(IDENTITY, Files.readString(tokenA).strip());
        Metadata both = new Metadata();
        both.merge(captured);
        both.put(IDENTITY, Files.readString(tokenA).strip());
        Map<String, Metadata> headers = new LinkedHashMap<>();
        headers.put("captured from the controller's call", captured);
        headers.put("node-a's token and the shared token", ownToken);
        headers.put("both", both);

        Map<String, List<String>> before = new TreeMap<>();
        for (String node : VICTIMS) {
            before.put(node, pool(node));
        }
        List<MethodDescriptor<?, ?>> methods = List.copyOf(NodeAgentGrpc.getServiceDescriptor().getMethods());
        assertTrue(methods.size() >= 10, "every RPC of the service: " + methods.size());
        List<String> wrong = new ArrayList<>();
        int calls = 0;
        for (String node : VICTIMS) {
            int port = cluster.agentPort(node);
            // What node-a can dial with: TLS without a client certificate, its own pair as one, plaintext.
            Map<String, ManagedChannel> channels = new LinkedHashMap<>();
            channels.put("no client certificate", tls(credentials, port, AgentSecurity.NODE_NAME, null));
            channels.put("node-a's pair as client certificate", tls(credentials, port, AgentSecurity.NODE_NAME, credentials.resolve("node")));
            channels.put("plaintext", NettyChannelBuilder.forAddress("127.0.0.1", port).usePlaintext().build());
            Map<String, Status.Code> expected = Map.of("no client certificate", Status.Code.UNAUTHENTICATED,
                    "node-a's pair as client certificate", Status.Code.UNAVAILABLE, "plaintext", Status.Code.UNAVAILABLE);
            try {
                for (MethodDescriptor<?, ?> method : methods) {
                    for (var channel : channels.entrySet()) {
                        for (var header : headers.entrySet()) {
                            Status status = call(channel.getValue(), method, header.getValue());
                            calls++;
                            if (status.getCode() != expected.get(channel.getKey())) {
                                wrong.add(node + " " + method.getBareMethodName() + " (" + channel.getKey() + ", " + header.getKey() + "): "
                                        + status);
                            }
                        }
                    }
                }
            } finally {
                channels.values().forEach(ManagedChannel::shutdownNow);
            }
        }
        System.out.printf("compromised node: %d calls to %d agents over %d RPCs, all refused%n", calls, VICTIMS.size(), methods.size());
        assertEquals(List.of(), wrong);
        for (String node : VICTIMS) {
            assertEquals(before.get(node), pool(node), node + "'s pool is as it was");
            String log = cluster.node(node).process().output();
            assertTrue(log.contains("refused a call on the agent channel") && log.contains("no client certificate"), log);
            assertFalse(log.contains(Files.readString(cluster.tokenFile()).strip()), "no token in the log");
        }

        // controller-server's own calls still pass.
        PipelineTest.cluster = cluster;
        Volume volume = PipelineTest.create("pvc-after-attack", 8 << 20, PipelineTest.mount("ext4"), "node-b");
        assertEquals("local/node-b/pvc-after-attack", volume.getVolumeId());
        assertTrue(Files.exists(cluster.node("node-b").pool().resolve("pvc-after-attack.img")));
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        assertTrue(Files.notExists(cluster.node("node-b").pool().resolve("pvc-after-attack.img")));
    }

    @Test
    void nodeARegistersAsNodeAOnly() throws Exception {
        assertEquals(Status.Code.OK, register(cluster, "node-a", tokenA), "its own name");
        assertEquals(Status.Code.PERMISSION_DENIED, register(cluster, "node-b", tokenA), "another node's name");
        cluster.controllerProcess().awaitOutput("refused a registration for another node");
        Path otherIssuer = token("node-a-other-issuer", TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-a1")
                .issuer("https://other-cluster.invalid"));
        assertEquals(Status.Code.UNAUTHENTICATED, register(cluster, "node-a", otherIssuer), "a token of another issuer");
        cluster.controllerProcess().awaitOutput("not by the cluster's issuer " + TestIssuer.ISSUER);
        Path noClaim = token("node-a-no-claim", TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-a1").withoutNode());
        assertEquals(Status.Code.PERMISSION_DENIED, register(cluster, "node-b", noClaim), "no node claim: refused by default");
        cluster.controllerProcess().awaitOutput("--allow-unbound-node-identity takes the node's word");
        assertEquals(Status.Code.UNAVAILABLE, registerWith(cluster, tls(credentials, cluster.registryPort(), AgentSecurity.NODE_NAME, null), "node-a", tokenA),
                "a registry that presents a node's certificate is not the controller");
    }

    @Test
    void withTheFlagATokenWithoutNodeClaimRegistersOnTheNodesWord() throws Exception {
        try (Cluster unbound = Cluster.startWithTls(dir.resolve("unbound"), credentials, controllerPod,
                controllerFlags("--allow-unbound-node-identity"), Map.of())) {
            Path noClaim = token("old-cluster-node", TestIssuer.Claims.of("strata-csi", "strata-node", "node-old", "pod-o1").withoutNode());
            assertEquals(Status.Code.OK, register(unbound, "node-old", noClaim));
            unbound.controllerProcess().awaitOutput("takes this node's word for its name");
        }
    }

    /**
     * node-a's agent as the attacker runs it (node-a's pair, registered with node-a's token): a
     * volume asked for on node-a makes controller-server call it; what that call carried.
     */
    private static Metadata capturedFromTheController() throws Exception {
        List<Metadata> received = new CopyOnWriteArrayList<>();
        ServerInterceptor recorder = new ServerInterceptor() {
            @Override
            public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(ServerCall<ReqT, RespT> call, Metadata headers,
                    ServerCallHandler<ReqT, RespT> next) {
                received.add(headers);
                return next.startCall(call, headers);
            }
        };
        Server agent = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                .sslContext(GrpcSslContexts.forServer(credentials.resolve("node/tls.crt").toFile(), credentials.resolve("node/tls.key").toFile())
                        .build())
                .addService(ServerInterceptors.intercept(new NodeAgentGrpc.NodeAgentImplBase() {}, recorder))
                .build().start();
        try {
            ManagedChannel registry = tls(credentials, cluster.registryPort(), AgentSecurity.CONTROLLER_NAME, null);
            PoolStatus pool = PoolStatus.newBuilder().setTotalBytes(1L << 30).setAvailableBytes(1L << 30).build();
            try {
                AgentRegistryGrpc.newBlockingStub(registry).withCallCredentials(holding(cluster, tokenA)).withDeadlineAfter(20, TimeUnit.SECONDS)
                        .register(RegisterRequest.newBuilder().setNodeId("node-a").setAddress("127.0.0.1:" + agent.getPort())
                                .setInstance("attacker").putTopology(PipelineTest.TOPOLOGY_KEY, "node-a")
                                .setPool(pool).addPools(pool).setGeneration(0).setInventory(Inventory.getDefaultInstance()).build());
            } finally {
                registry.shutdownNow();
            }
            try {
                cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName("pvc-lure")
                        .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(8 << 20))
                        .addVolumeCapabilities(PipelineTest.mount("ext4"))
                        .setAccessibilityRequirements(TopologyRequirement.newBuilder().addRequisite(PipelineTest.on("node-a"))).build());
            } catch (StatusRuntimeException expected) {
                // The attacker's agent answers nothing useful; the call's headers are what it wanted.
            }
        } finally {
            agent.shutdownNow().awaitTermination(10, TimeUnit.SECONDS);
        }
        assertFalse(received.isEmpty(), "controller-server called node-a's agent");
        Metadata useful = new Metadata();
        for (String key : received.getFirst().keys()) {
            if (!key.endsWith(Metadata.BINARY_HEADER_SUFFIX) && !Set.of("user-agent", "grpc-accept-encoding", "grpc-timeout", "content-type", "te")
                    .contains(key)) {
                Metadata.Key<String> name = Metadata.Key.of(key, Metadata.ASCII_STRING_MARSHALLER);
                useful.put(name, received.getFirst().get(name));
            }
        }
        return useful;
    }

    /**
     * A TLS channel to 127.0.0.1:{@code port} trusting the CA in {@code credentials} (as
     * hack/agent-credentials.sh lays them out) and expecting {@code name}; with the pair in
     * {@code pair} as client certificate, none if null.
     */
    static ManagedChannel tls(Path credentials, int port, String name, Path pair) throws IOException {
        var context = GrpcSslContexts.forClient().trustManager(credentials.resolve("ca.crt").toFile());
        if (pair != null) {
            context.keyManager(pair.resolve("tls.crt").toFile(), pair.resolve("tls.key").toFile());
        }
        return NettyChannelBuilder.forAddress("127.0.0.1", port).overrideAuthority(name).sslContext(context.build()).build();
    }

    /** What node-a holds for a call to {@code target}'s registry: the shared token and {@code identity}. */
    private static io.grpc.CallCredentials holding(Cluster target, Path identity) throws Exception {
        return new CompositeCallCredentials(AgentToken.fromFile(target.tokenFile()).credentials(),
                new IdentityToken(identity).credentials());
    }

    static Status.Code register(Cluster target, String nodeId, Path identity) throws Exception {
        return registerWith(target, tls(credentials, target.registryPort(), AgentSecurity.CONTROLLER_NAME, null), nodeId, identity);
    }

    private static Status.Code registerWith(Cluster target, ManagedChannel channel, String nodeId, Path identity) throws Exception {
        try {
            AgentRegistryGrpc.newBlockingStub(channel).withCallCredentials(holding(target, identity)).withDeadlineAfter(20, TimeUnit.SECONDS)
                    .register(RegisterRequest.newBuilder().setNodeId(nodeId).setAddress("127.0.0.1:1").build());
            return Status.Code.OK;
        } catch (StatusRuntimeException e) {
            return e.getStatus().getCode();
        } finally {
            channel.shutdownNow();
        }
    }

    /** One call of {@code method} (whatever its kind: unary or streaming) with an empty request and {@code headers}; how it ended. */
    static Status call(ManagedChannel channel, MethodDescriptor<?, ?> method, Metadata headers) throws Exception {
        MethodDescriptor<byte[], byte[]> raw = MethodDescriptor.newBuilder(BYTES, BYTES).setType(method.getType())
                .setFullMethodName(method.getFullMethodName()).build();
        ClientCall<byte[], byte[]> call = channel.newCall(raw, CallOptions.DEFAULT.withDeadlineAfter(20, TimeUnit.SECONDS));
        CompletableFuture<Status> closed = new CompletableFuture<>();
        Metadata sent = new Metadata();
        sent.merge(headers);
        call.start(new ClientCall.Listener<>() {
            @Override
            public void onClose(Status status, Metadata trailers) {
                closed.complete(status);
            }
        }, sent);
        call.request(Integer.MAX_VALUE);
        call.sendMessage(new byte[0]);
        call.halfClose();
        return closed.get(30, TimeUnit.SECONDS);
    }

    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };

    /** What is in {@code node}'s pool, names and sizes. */
    private static List<String> pool(String node) throws IOException {
        try (Stream<Path> files = Files.walk(cluster.node(node).pool())) {
            return files.map(file -> cluster.node(node).pool().relativize(file) + " " + file.toFile().length()).sorted().toList();
        }
    }
}
