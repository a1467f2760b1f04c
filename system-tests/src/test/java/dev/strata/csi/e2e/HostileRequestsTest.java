package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.Descriptor;
import com.google.protobuf.Descriptors.EnumDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.DynamicMessage;
import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.IdentityGrpc;
import csi.v1.NodeGrpc;
import csi.v1.SnapshotMetadataGrpc;
import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.auth.AgentToken;
import dev.strata.csi.auth.IdentityToken;
import dev.strata.csi.testing.TestIssuer;
import io.grpc.CallCredentials;
import io.grpc.CompositeCallCredentials;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.ServiceDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.ProtoMethodDescriptorSupplier;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Seeded random malformed requests, {@value #DEFAULT_REQUESTS} by default, to every RPC of both
 * servers and of the agent API: every field of every request filled, left out, or given a hostile
 * value (empty, huge, NUL, unicode, traversal, names too long for the kernel, absolute paths of
 * canaries outside kubelet's directory, extreme numbers, unknown enum values), built from the
 * protocol's own descriptors so no field is forgotten. Afterwards: no server died, no answer was
 * INTERNAL or UNKNOWN or carried Java exception text, every
 * canary is as it was, no mount or loop device appeared outside the test's directory, and a real
 * volume still goes through the whole pipeline. {@code -Dstrata.hostile.seed=N} replays a run;
 * {@code -Dstrata.hostile.requests=N} sets how many. Over TLS, as deployed, a twentieth of that
 * many knock at the agent channel's door without the controller's certificate or a node's token.
 */
@Tag("root")
class HostileRequestsTest {

    static final int DEFAULT_REQUESTS = 10_000;
    private static final String NODE = "node-a";
    private static final Set<Status.Code> NEVER = Set.of(Status.Code.INTERNAL, Status.Code.UNKNOWN, Status.Code.DEADLINE_EXCEEDED);

    @TempDir
    Path dir;

    @TempDir
    Path outside;

    /** A method of one of the servers, with the channel and credentials to call it. */
    private record Target(String server, MethodDescriptor<DynamicMessage, DynamicMessage> method, Descriptor input, Channel channel,
            boolean agentApi) {}

    @Test
    void malformedRequestsToEveryRpcChangeNothingOutsideAndBreakNothing() throws Exception {
        Root.require();
        long seed = Long.getLong("strata.hostile.seed", new Random().nextLong());
        int requests = Integer.getInteger("strata.hostile.requests", DEFAULT_REQUESTS);
        System.out.printf("hostile suite: seed=%d (replay with -Dstrata.hostile.seed=%d)%n", seed, seed);
        Canaries canaries = new Canaries(outside);
        List<String> failures = new ArrayList<>();
        Map<String, Map<Status.Code, Integer>> answers = new TreeMap<>();
        long started = System.nanoTime();
        String errors;

        try (Cluster cluster = Cluster.start(dir, NODE)) {
            ManagedChannel agent = ManagedChannelBuilder.forAddress("127.0.0.1", cluster.agentPort(NODE)).usePlaintext().build();
            ManagedChannel registry = ManagedChannelBuilder.forAddress("127.0.0.1", cluster.registryPort()).usePlaintext().build();
            try {
                List<Target> targets = new ArrayList<>();
                add(targets, "controller", IdentityGrpc.getServiceDescriptor(), cluster.controller().getChannel(), false);
                add(targets, "controller", ControllerGrpc.getServiceDescriptor(), cluster.controller().getChannel(), false);
                add(targets, "controller", SnapshotMetadataGrpc.getServiceDescriptor(), cluster.controller().getChannel(), false);
                add(targets, "node", IdentityGrpc.getServiceDescriptor(), cluster.node(NODE).channel(), false);
                add(targets, "node", NodeGrpc.getServiceDescriptor(), cluster.node(NODE).channel(), false);
                add(targets, "agent", NodeAgentGrpc.getServiceDescriptor(), agent, true);
                add(targets, "controller", AgentRegistryGrpc.getServiceDescriptor(), registry, true);
                AgentToken token = AgentToken.fromFile(cluster.tokenFile());
                Values values = new Values(new Random(seed), dir, cluster.kubeletDir(NODE, "pods/fuzz"), canaries.paths());

                for (int i = 0; i < requests; i++) {
                    Target target = targets.get(values.random.nextInt(targets.size()));
                    DynamicMessage request = values.message(target.input(), 0);
                    CallOptions options = CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS);
                    if (target.agentApi() && values.random.nextInt(10) > 0) { // mostly with the token: past the door
                        options = options.withCallCredentials(token.credentials());
                    }
                    Status.Code code;
                    try {
                        if (target.method().getType() == MethodDescriptor.MethodType.SERVER_STREAMING) {
                            ClientCalls.blockingServerStreamingCall(target.channel(), target.method(), options, request)
                                    .forEachRemaining(response -> { });
                        } else {
                            ClientCalls.blockingUnaryCall(target.channel(), target.method(), options, request);
                        }
                        code = Status.Code.OK;
                    } catch (StatusRuntimeException e) {
                        code = e.getStatus().getCode();
                        String description = String.valueOf(e.getStatus().getDescription());
                        boolean javaText = description.contains("Exception") || description.contains("java.");
                        if ((NEVER.contains(code) || javaText) && failures.size() < 20) {
                            failures.add(target.method().getFullMethodName() + " -> " + e.getStatus() + "\n    request: "
                                    + request.toString().replace("\n", " ").substring(0, Math.min(600, request.toString().length())));
                        }
                    }
                    answers.computeIfAbsent(target.server() + " " + target.method().getBareMethodName(), k -> new TreeMap<>())
                            .merge(code, 1, Integer::sum);
                }
                // What the servers logged of their errors, for a failure to point at.
                errors = cluster.logs().lines().filter(line -> line.contains("level=ERROR") || line.startsWith("\tat dev.strata")
                        || line.contains("Exception")).limit(60).collect(Collectors.joining("\n"));
                assertTrue(cluster.controllerProcess().isAlive(), "controller-server died");
                assertTrue(cluster.node(NODE).process().isAlive(), "node-server died");
                // A forged registration may have taken node-a's name; its agent's next renewal takes it back.
                Thread.sleep(2_500);
                listsStillAnswer(cluster);
                PipelineTest.cluster = cluster;
                try {
                    aVolumeStillGoesThroughEveryPhase(cluster);
                } finally {
                    PipelineTest.cluster = null;
                }
            } finally {
                agent.shutdownNow();
                registry.shutdownNow();
            }
        }
        SystemState.cleanUp(dir); // what the accepted requests made below the test's directory
        long total = answers.values().stream().flatMap(m -> m.values().stream()).mapToInt(Integer::intValue).sum();
        Map<Status.Code, Integer> byCode = new TreeMap<>();
        answers.values().forEach(m -> m.forEach((code, n) -> byCode.merge(code, n, Integer::sum)));
        System.out.printf("hostile suite: seed=%d requests=%d rpcs=%d %.1f s answers=%s%n", seed, total, answers.size(),
                (System.nanoTime() - started) / 1e9, byCode);
        answers.forEach((rpc, codes) -> System.out.println("  " + rpc + " " + codes));

        assertEquals(List.of(), failures, "answers no bad input may get (replay with -Dstrata.hostile.seed=" + seed + ")\n" + errors);
        assertEquals(List.of(), canaries.changed(), "canaries outside kubelet's directory (seed " + seed + ")");
        // Only this test's servers could have mounted at or attached the outside paths it sent; other
        // work on the machine makes mounts and devices of its own.
        List<String> outsidePaths = Values.outsidePaths(canaries.paths());
        List<String> mountsOutside = SystemState.run("findmnt", "--raw", "--noheadings", "--output", "TARGET").lines()
                .filter(outsidePaths::contains).toList();
        assertEquals(List.of(), mountsOutside, "mounts outside kubelet's directory (seed " + seed + ")");
        List<String> loopsOutside = SystemState.run("losetup", "--list", "--noheadings", "--raw", "--output", "NAME,BACK-FILE").lines()
                .filter(line -> outsidePaths.stream().anyMatch(path -> line.endsWith(" " + path))).toList();
        assertEquals(List.of(), loopsOutside, "loop devices on files outside the pool (seed " + seed + ")");
    }

    /**
     * ListVolumes and ListSnapshots answer for the cluster whatever the forged registrations
     * reported (malformed names, sizes): the controller dropped what it could not list. A forged
     * node that reported nothing holds them UNAVAILABLE until its lease runs out, no longer.
     */
    private static void listsStillAnswer(Cluster cluster) throws Exception {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            try {
                cluster.controller().listVolumes(csi.v1.Csi.ListVolumesRequest.getDefaultInstance());
                cluster.controller().listSnapshots(csi.v1.Csi.ListSnapshotsRequest.getDefaultInstance());
                return;
            } catch (StatusRuntimeException e) {
                if (e.getStatus().getCode() != Status.Code.UNAVAILABLE || System.nanoTime() > until) {
                    throw new AssertionError("ListVolumes or ListSnapshots after the hostile requests: " + e.getStatus(), e);
                }
                Thread.sleep(500);
            }
        }
    }

    /**
     * The agent channel's door over TLS, as deployed (issue 40): seeded random malformed requests to
     * every unary RPC of the agent, with the shared token and without a client certificate
     * (UNAUTHENTICATED, every one) or with the node pair as one (the handshake refuses it:
     * UNAVAILABLE, every one), and registrations with a token of another issuer or without a token
     * (UNAUTHENTICATED, every one). Nothing reaches a handler: the pool is as it was, and a volume
     * still goes through the whole pipeline.
     */
    @Test
    void theAgentChannelTurnsAwayEveryoneButTheControllerAndTheNodes() throws Exception {
        Root.require();
        long seed = Long.getLong("strata.hostile.seed", new Random().nextLong());
        int requests = Integer.getInteger("strata.hostile.requests", DEFAULT_REQUESTS) / 20;
        System.out.printf("hostile agent channel: seed=%d%n", seed);
        Path credentials = dir.resolve("credentials");
        SystemState.run("bash", Path.of(System.getProperty("user.dir")).getParent().resolve("hack/agent-credentials.sh").toString(),
                credentials.toString(), "1");
        TestIssuer issuer = new TestIssuer("hostile-key");
        Path keys = issuer.writeKeys(dir.resolve("jwks.json"));
        Path nodeToken = Files.writeString(dir.resolve("node.token"), issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", NODE, "pod-1")));
        Path otherIssuer = Files.writeString(dir.resolve("other-issuer.token"), issuer.token(
                TestIssuer.Claims.of("strata-csi", "strata-node", NODE, "pod-1").issuer("https://other-cluster.invalid")));
        Map<String, Status.Code> expected = Map.of("agent, no client certificate", Status.Code.UNAUTHENTICATED,
                "agent, the node pair as client certificate", Status.Code.UNAVAILABLE,
                "registry, a token of another issuer", Status.Code.UNAUTHENTICATED, "registry, no identity token", Status.Code.UNAUTHENTICATED);
        Map<String, Map<Status.Code, Integer>> answers = new TreeMap<>();
        try (Cluster cluster = Cluster.startWithTls(dir.resolve("cluster"), credentials, List.of("--agent-identity-keys", keys.toString(),
                "--agent-identity-issuer", TestIssuer.ISSUER, "--agent-identity-callers", "strata-csi/strata-node"),
                Map.of("AGENT_IDENTITY_TOKEN_FILE", nodeToken.toString()), NODE)) {
            List<String> poolBefore = SystemState.run("ls", "-lA", cluster.node(NODE).pool().toString()).lines().toList();
            Map<String, ManagedChannel> channels = new TreeMap<>();
            int agentPort = cluster.agentPort(NODE);
            channels.put("agent, no client certificate", CompromisedNodeTest.tls(credentials, agentPort, AgentSecurity.NODE_NAME, null));
            channels.put("agent, the node pair as client certificate",
                    CompromisedNodeTest.tls(credentials, agentPort, AgentSecurity.NODE_NAME, credentials.resolve("node")));
            ManagedChannel registry = CompromisedNodeTest.tls(credentials, cluster.registryPort(), AgentSecurity.CONTROLLER_NAME, null);
            channels.put("registry, a token of another issuer", registry);
            channels.put("registry, no identity token", registry);
            try {
                AgentToken token = AgentToken.fromFile(cluster.tokenFile());
                Map<String, CallCredentials> credentialsOf = Map.of(
                        "registry, a token of another issuer", new CompositeCallCredentials(token.credentials(),
                                new IdentityToken(otherIssuer).credentials()));
                Map<String, List<Target>> targets = new TreeMap<>();
                for (String door : channels.keySet()) {
                    List<Target> list = new ArrayList<>();
                    add(list, door, door.startsWith("agent") ? NodeAgentGrpc.getServiceDescriptor() : AgentRegistryGrpc.getServiceDescriptor(),
                            channels.get(door), true);
                    targets.put(door, list);
                }
                Values values = new Values(new Random(seed), dir, cluster.kubeletDir(NODE, "pods/fuzz"), new Canaries(outside).paths());
                List<String> wrong = new ArrayList<>();
                for (int i = 0; i < requests; i++) {
                    String door = List.copyOf(channels.keySet()).get(values.random.nextInt(channels.size()));
                    Target target = targets.get(door).get(values.random.nextInt(targets.get(door).size()));
                    CallOptions options = CallOptions.DEFAULT.withDeadlineAfter(30, TimeUnit.SECONDS)
                            .withCallCredentials(credentialsOf.getOrDefault(door, token.credentials()));
                    Status.Code code;
                    try {
                        ClientCalls.blockingUnaryCall(target.channel(), target.method(), options, values.message(target.input(), 0));
                        code = Status.Code.OK;
                    } catch (StatusRuntimeException e) {
                        code = e.getStatus().getCode();
                    }
                    answers.computeIfAbsent(door, k -> new TreeMap<>()).merge(code, 1, Integer::sum);
                    if (code != expected.get(door) && wrong.size() < 20) {
                        wrong.add(door + " " + target.method().getBareMethodName() + " -> " + code);
                    }
                }
                System.out.printf("hostile agent channel: seed=%d requests=%d answers=%s%n", seed, requests, answers);
                assertEquals(List.of(), wrong, "seed " + seed);
                assertEquals(expected.keySet(), answers.keySet(), "every door was tried");
                assertEquals(poolBefore, SystemState.run("ls", "-lA", cluster.node(NODE).pool().toString()).lines().toList(),
                        "nothing reached the agent's handlers");
            } finally {
                channels.values().forEach(ManagedChannel::shutdownNow);
            }
            PipelineTest.cluster = cluster;
            try {
                aVolumeStillGoesThroughEveryPhase(cluster);
            } finally {
                PipelineTest.cluster = null;
            }
        }
        SystemState.cleanUp(dir);
    }

    private static void aVolumeStillGoesThroughEveryPhase(Cluster cluster) throws Exception {
        VolumeCapability capability = PipelineTest.mount("ext4");
        Volume volume = PipelineTest.create("pvc-after-hostile-requests", 32L << 20, capability, NODE);
        String id = volume.getVolumeId();
        Path staging = cluster.kubeletDir(NODE, "plugins/after/globalmount");
        Path target = cluster.kubeletDir(NODE, "pods/after/volumes").resolve("mount");
        var node = cluster.node(NODE).node();
        cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder().setVolumeId(id).setNodeId(NODE)
                .setVolumeCapability(capability).build());
        node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(staging.toString())
                .setVolumeCapability(capability).build());
        node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(staging.toString())
                .setTargetPath(target.toString()).setVolumeCapability(capability).build());
        Files.writeString(target.resolve("still-works"), "yes");
        assertEquals("yes", Files.readString(target.resolve("still-works")));
        node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id).setTargetPath(target.toString()).build());
        node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(staging.toString()).build());
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder().setVolumeId(id).setNodeId(NODE).build());
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(id).build());
    }

    private static void add(List<Target> targets, String server, ServiceDescriptor service, Channel channel, boolean agentApi) {
        for (MethodDescriptor<?, ?> method : service.getMethods()) {
            Descriptor input = ((ProtoMethodDescriptorSupplier) method.getSchemaDescriptor()).getMethodDescriptor().getInputType();
            Descriptor output = ((ProtoMethodDescriptorSupplier) method.getSchemaDescriptor()).getMethodDescriptor().getOutputType();
            MethodDescriptor<DynamicMessage, DynamicMessage> dynamic = MethodDescriptor.<DynamicMessage, DynamicMessage>newBuilder()
                    .setType(method.getType())
                    .setFullMethodName(method.getFullMethodName())
                    .setRequestMarshaller(ProtoUtils.marshaller(DynamicMessage.getDefaultInstance(input)))
                    .setResponseMarshaller(ProtoUtils.marshaller(DynamicMessage.getDefaultInstance(output)))
                    .build();
            // The SnapshotMetadata service's streams too: each is read to its end. The agent's streams of
            // content have suites of their own (ContentTransferTest, TransferCrashTest).
            boolean snapshotMetadata = service.getName().equals(SnapshotMetadataGrpc.SERVICE_NAME);
            if (method.getType() == MethodDescriptor.MethodType.UNARY
                    || (snapshotMetadata && method.getType() == MethodDescriptor.MethodType.SERVER_STREAMING)) {
                targets.add(new Target(server, dynamic, input, channel, agentApi));
            }
        }
    }

    /** Field values, hostile and plausible, drawn from one seeded generator. */
    private static final class Values {

        final Random random;
        private final List<String> strings = new ArrayList<>();
        private final List<String> paths = new ArrayList<>();
        private final List<String> ids = new ArrayList<>();
        private static final long[] NUMBERS = {0, 1, -1, 512, 1 << 20, 64L << 20, 1L << 30, Long.MAX_VALUE, Long.MIN_VALUE,
            Integer.MAX_VALUE, Integer.MIN_VALUE, 300L << 20};

        Values(Random random, Path clusterDir, Path kubeletSubdir, List<String> canaryPaths) {
            this.random = random;
            strings.addAll(List.of("", " ", "x".repeat(70_000), "nul\0byte", "ünïcödé-ボリューム-\u202e-\u0301", "\ud83d\udcbe",
                    "../../../../etc/passwd", "..", ".", "/", "//", "a/../../b", "$(reboot)", "`id`", "-o", "--help", "pvc-fuzz",
                    "ext4", "xfs", "btrfs", "nfs", "sparse", "full", "node-a", "strata.csi.dev", "0755", "\n", "a,b=c",
                    "loop,offset=0", "server", "share", "subDir", "onDelete", "archive", "${pvc.metadata.name}"));
            strings.addAll(canaryPaths);
            paths.addAll(outsidePaths(canaryPaths));
            paths.addAll(List.of("/", "relative/path",
                    clusterDir.toString(), clusterDir + "/" + NODE + "/pool", clusterDir + "/" + NODE + "/pool/pvc-fuzz-1.img",
                    kubeletSubdir.toString(), kubeletSubdir + "/mount", kubeletSubdir + "/../../../../../etc",
                    kubeletSubdir + "/block", clusterDir + "/" + NODE + "/kubelet/plugins/globalmount",
                    // Too long for the kernel: a name over NAME_MAX (in bytes, not characters), a path over PATH_MAX.
                    kubeletSubdir + "/" + "\u00fc".repeat(300), kubeletSubdir + "/" + "x".repeat(256),
                    kubeletSubdir + ("/" + "d".repeat(200)).repeat(21)));
            for (String name : List.of("pvc-fuzz-1", "pvc-fuzz-2", "pvc-x", "../x", "", "pvc-" + "y".repeat(300))) {
                ids.add("local/" + NODE + "/" + name);
                ids.add(name);
            }
            for (String name : List.of("snapshot-fuzz-1", "snapshot-fuzz-2", "../snapshot", "")) {
                ids.add("local-snapshot/" + NODE + "/" + name);
            }
            ids.addAll(List.of("local/node-b/pvc-fuzz-1", "local//pvc", "nfs/server/%2Fshare/sub/delete", "nfs/../../x/delete",
                    "local/node-a/../../../etc/passwd"));
        }

        /** The absolute paths outside kubelet's directory that requests carry. */
        static List<String> outsidePaths(List<String> canaryPaths) {
            List<String> outside = new ArrayList<>(canaryPaths);
            outside.addAll(List.of("/etc/passwd", "/dev/null", "/tmp", "/proc/self/root/etc"));
            return outside;
        }

        DynamicMessage message(Descriptor type, int depth) {
            if (type.equals(VolumeCapability.getDescriptor()) && random.nextBoolean()) {
                // Half the capabilities are valid, so that requests get past them to the paths and ids.
                return DynamicMessage.newBuilder(random.nextBoolean() ? PipelineTest.mount("ext4") : PipelineTest.block()).build();
            }
            DynamicMessage.Builder builder = DynamicMessage.newBuilder(type);
            for (FieldDescriptor field : type.getFields()) {
                if (random.nextInt(10) < 2 || (depth > 3 && field.getJavaType() == FieldDescriptor.JavaType.MESSAGE)) {
                    continue; // left out
                }
                if (field.isMapField()) {
                    Descriptor entry = field.getMessageType();
                    for (int n = random.nextInt(4); n > 0; n--) {
                        DynamicMessage.Builder pair = DynamicMessage.newBuilder(entry);
                        pair.setField(entry.findFieldByName("key"), value(entry.findFieldByName("key"), depth + 1));
                        pair.setField(entry.findFieldByName("value"), value(entry.findFieldByName("value"), depth + 1));
                        builder.addRepeatedField(field, pair.build());
                    }
                } else if (field.isRepeated()) {
                    for (int n = random.nextInt(4); n > 0; n--) {
                        builder.addRepeatedField(field, value(field, depth + 1));
                    }
                } else {
                    builder.setField(field, value(field, depth + 1));
                }
            }
            return builder.build();
        }

        private Object value(FieldDescriptor field, int depth) {
            String name = field.getName();
            return switch (field.getJavaType()) {
                case STRING -> name.contains("path") ? pick(paths) : name.endsWith("_id") ? pick(ids)
                        : name.equals("name") && random.nextBoolean() ? "pvc-fuzz-" + random.nextInt(3) : pick(strings);
                case LONG -> random.nextInt(4) == 0 ? random.nextLong() % (1L << 31) : NUMBERS[random.nextInt(NUMBERS.length)];
                case INT -> (int) NUMBERS[random.nextInt(NUMBERS.length)];
                case BOOLEAN -> random.nextBoolean();
                case DOUBLE -> random.nextDouble();
                case FLOAT -> random.nextFloat();
                case BYTE_STRING -> ByteString.copyFromUtf8(pick(strings));
                case ENUM -> enumValue(field.getEnumType());
                case MESSAGE -> message(field.getMessageType(), depth);
            };
        }

        private Object enumValue(EnumDescriptor type) {
            return random.nextInt(8) == 0 ? type.findValueByNumberCreatingIfUnknown(1000 + random.nextInt(1000))
                    : type.getValues().get(random.nextInt(type.getValues().size()));
        }

        private String pick(List<String> from) {
            return from.get(random.nextInt(from.size()));
        }
    }

    /** Things a wrong path could name, outside kubelet's directory: a file, an empty directory, a device node, a link. */
    private static final class Canaries {

        private final Path file;
        private final Path emptyDir;
        private final Path device;
        private final Path link;
        private final Map<Path, String> before;

        Canaries(Path dir) throws Exception {
            file = Files.writeString(dir.resolve("canary-file"), "do not touch\n");
            emptyDir = Files.createDirectory(dir.resolve("canary-dir"));
            device = dir.resolve("canary-device");
            SystemState.run("mknod", device.toString(), "c", "1", "3");
            link = Files.createSymbolicLink(dir.resolve("canary-link"), file);
            before = state();
        }

        List<String> paths() {
            return List.of(file.toString(), emptyDir.toString(), device.toString(), link.toString(), emptyDir + "/mount");
        }

        List<String> changed() throws Exception {
            Map<Path, String> now = state();
            return before.keySet().stream().filter(path -> !before.get(path).equals(now.get(path)))
                    .map(path -> path + ": " + before.get(path) + " -> " + now.get(path)).collect(Collectors.toList());
        }

        private Map<Path, String> state() throws Exception {
            Map<Path, String> state = new TreeMap<>();
            for (Path path : List.of(file, emptyDir, device, link)) {
                String stat = SystemState.run("stat", "--format", "%F %a %s %Y %t:%T %N", path.toString()).strip();
                String content = Files.isRegularFile(path) ? HexFormat.of().formatHex(
                        MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(path))) : "";
                String listing = Files.isDirectory(path) && !Files.isSymbolicLink(path)
                        ? String.join(",", SystemState.run("ls", "-A", path.toString()).lines().toList()) : "";
                state.put(path, stat + " " + content + " " + listing);
            }
            return state;
        }
    }
}
