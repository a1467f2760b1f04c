package dev.strata.csi.controller;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.GetPluginCapabilitiesRequest;
import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.GetPluginInfoResponse;
import csi.v1.Csi.PluginCapability;
import csi.v1.Csi.ProbeRequest;
import csi.v1.IdentityGrpc;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.auth.AgentToken;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.util.ArrayList;
import dev.strata.csi.BuildInfo;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** controller-server as a real process, called over its unix socket. */
@Tag("root")
class ControllerServerTest {

    @TempDir
    Path dir;

    private ServerProcess server;
    private ManagedChannel channel;

    private int registryPort;

    private void start(String... extraArgs) throws Exception {
        Path socket = dir.resolve("controller.sock");
        Path token = Files.writeString(dir.resolve("token"), TOKEN);
        try (ServerSocket free = new ServerSocket(0)) {
            registryPort = free.getLocalPort();
        }
        List<String> args = new ArrayList<>(List.of("--endpoint", "unix://" + socket,
                "--agent-token-file", token.toString(), "--agent-registry-address", "127.0.0.1:" + registryPort,
                "--agent-plaintext", "true"));
        args.addAll(List.of(extraArgs));
        server = ServerProcess.start(ControllerServer.class, args.toArray(String[]::new)).awaitListening(socket);
        channel = Sockets.channel(socket);
    }

    private static final String TOKEN = "controller-test-token-42";

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
    void identityNamesTheDriverAndOffersTheControllerService() throws Exception {
        start("--driver-name", "local.storage.example.com");
        var identity = IdentityGrpc.newBlockingStub(channel);
        GetPluginInfoResponse info = identity.getPluginInfo(GetPluginInfoRequest.getDefaultInstance());
        assertEquals("local.storage.example.com", info.getName());
        assertEquals(BuildInfo.version(), info.getVendorVersion());
        assertFalse(info.getVendorVersion().isBlank());
        List<PluginCapability> capabilities =
                identity.getPluginCapabilities(GetPluginCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList();
        assertEquals(List.of(PluginCapability.Service.Type.CONTROLLER_SERVICE,
                        PluginCapability.Service.Type.GROUP_CONTROLLER_SERVICE,
                        PluginCapability.Service.Type.VOLUME_ACCESSIBILITY_CONSTRAINTS, PluginCapability.Service.Type.SNAPSHOT_METADATA_SERVICE),
                capabilities.stream().filter(PluginCapability::hasService).map(c -> c.getService().getType()).toList());
        assertEquals(List.of(PluginCapability.VolumeExpansion.Type.ONLINE), capabilities.stream()
                .filter(PluginCapability::hasVolumeExpansion).map(c -> c.getVolumeExpansion().getType()).toList());
        assertTrue(identity.probe(ProbeRequest.getDefaultInstance()).getReady().getValue());
    }

    @Test
    void withNoNodeAgentThereIsNowhereToCreateAVolume() throws Exception {
        start("--agent-settle-time", "0s");
        var controller = ControllerGrpc.newBlockingStub(channel);
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
                () -> controller.createVolume(CreateVolumeRequest.newBuilder().setName("pvc-1")
                        .addVolumeCapabilities(VolumeCapability.newBuilder()
                                .setMount(VolumeCapability.MountVolume.getDefaultInstance())
                                .setAccessMode(VolumeCapability.AccessMode.newBuilder()
                                        .setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)))
                        .build()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, e.getStatus().getCode());
        assertTrue(e.getStatus().getDescription().contains("no node agent"), e.getStatus().getDescription());
    }

    @Test
    void snapshotCallsCheckTheirRequestAndNameNothingUnknown() throws Exception {
        start("--agent-settle-time", "0s");
        var controller = ControllerGrpc.newBlockingStub(channel);
        StatusRuntimeException noName = assertThrows(StatusRuntimeException.class, () -> controller.createSnapshot(
                CreateSnapshotRequest.newBuilder().setSourceVolumeId("local/node-a/pvc-1").build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, noName.getStatus().getCode());
        StatusRuntimeException noSource = assertThrows(StatusRuntimeException.class, () -> controller.createSnapshot(
                CreateSnapshotRequest.newBuilder().setName("snap-1").build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, noSource.getStatus().getCode());
        StatusRuntimeException unknown = assertThrows(StatusRuntimeException.class, () -> controller.createSnapshot(
                CreateSnapshotRequest.newBuilder().setName("snap-1").setSourceVolumeId("no-such-volume").build()));
        assertEquals(Status.Code.NOT_FOUND, unknown.getStatus().getCode());

        controller.deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId("never-handed-out").build());
        StatusRuntimeException noId = assertThrows(StatusRuntimeException.class,
                () -> controller.deleteSnapshot(DeleteSnapshotRequest.getDefaultInstance()));
        assertEquals(Status.Code.INVALID_ARGUMENT, noId.getStatus().getCode());

        assertEquals(0, controller.listSnapshots(ListSnapshotsRequest.newBuilder().setSnapshotId("never-handed-out").build())
                .getEntriesCount());
        StatusRuntimeException badToken = assertThrows(StatusRuntimeException.class, () -> controller.listSnapshots(
                ListSnapshotsRequest.newBuilder().setStartingToken("page-7").build()));
        assertEquals(Status.Code.ABORTED, badToken.getStatus().getCode());
        StatusRuntimeException negative = assertThrows(StatusRuntimeException.class, () -> controller.listSnapshots(
                ListSnapshotsRequest.newBuilder().setMaxEntries(-1).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, negative.getStatus().getCode());
    }

    @Test
    void rightAfterAStartNothingIsReportedGoneWhileAgentsMayBeOnTheirWayBack() throws Exception {
        start(); // default settle time: 20s
        var controller = ControllerGrpc.newBlockingStub(channel);
        StatusRuntimeException list = assertThrows(StatusRuntimeException.class,
                () -> controller.listVolumes(csi.v1.Csi.ListVolumesRequest.getDefaultInstance()));
        assertEquals(Status.Code.UNAVAILABLE, list.getStatus().getCode(), "an empty list would read as every volume detached");
        StatusRuntimeException publish = assertThrows(StatusRuntimeException.class,
                () -> controller.controllerPublishVolume(csi.v1.Csi.ControllerPublishVolumeRequest.newBuilder()
                        .setVolumeId("local/node-x/pvc-1").setNodeId("node-x")
                        .setVolumeCapability(VolumeCapability.newBuilder()
                                .setMount(VolumeCapability.MountVolume.getDefaultInstance())
                                .setAccessMode(VolumeCapability.AccessMode.newBuilder()
                                        .setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)))
                        .build()));
        assertEquals(Status.Code.UNAVAILABLE, publish.getStatus().getCode(), "not NOT_FOUND: node-x may be about to renew");
    }

    @Test
    void agentRegistryRefusesCallsWithoutTheToken() throws Exception {
        start();
        ManagedChannel tcp = NettyChannelBuilder.forAddress("127.0.0.1", registryPort).usePlaintext().build();
        try {
            RegisterRequest register = RegisterRequest.newBuilder().setNodeId("n1").setAddress("127.0.0.1:1").build();
            StatusRuntimeException none = assertThrows(StatusRuntimeException.class,
                    () -> AgentRegistryGrpc.newBlockingStub(tcp).register(register));
            assertEquals(Status.Code.UNAUTHENTICATED, none.getStatus().getCode());
            Path wrongFile = Files.writeString(dir.resolve("wrong"), "not-the-right-token-at-all");
            StatusRuntimeException wrong = assertThrows(StatusRuntimeException.class,
                    () -> AgentRegistryGrpc.newBlockingStub(tcp).withCallCredentials(AgentToken.fromFile(wrongFile).credentials())
                            .register(register));
            assertEquals(Status.Code.UNAUTHENTICATED, wrong.getStatus().getCode());
            Path rightFile = Files.writeString(dir.resolve("right"), TOKEN + "\n");
            assertEquals(10, AgentRegistryGrpc.newBlockingStub(tcp).withCallCredentials(AgentToken.fromFile(rightFile).credentials())
                    .register(register).getRenewSeconds());
            assertFalse(server.output().contains(TOKEN), "the token never reaches the log");
        } finally {
            tcp.shutdownNow();
        }
    }

    @Test
    void theAgentChannelIsNeverPlaintextUnlessAskedFor() throws Exception {
        Path token = Files.writeString(dir.resolve("token"), TOKEN);
        try (ServerProcess noTls = ServerProcess.start(ControllerServer.class,
                "--endpoint", "unix://" + dir.resolve("c.sock"), "--agent-token-file", token.toString())) {
            assertEquals(2, noTls.exitCode());
            assertTrue(noTls.output().contains("the agent channel needs --agent-tls-cert"), noTls.output());
        }
    }

    @Test
    void advertisesWhatWorks() throws Exception {
        start();
        var types = ControllerGrpc.newBlockingStub(channel)
                .controllerGetCapabilities(ControllerGetCapabilitiesRequest.getDefaultInstance())
                .getCapabilitiesList().stream().map(c -> c.getRpc().getType().name()).toList();
        assertEquals(List.of("CREATE_DELETE_VOLUME", "PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES",
                "LIST_VOLUMES_PUBLISHED_NODES", "GET_VOLUME", "GET_CAPACITY", "SINGLE_NODE_MULTI_WRITER", "EXPAND_VOLUME",
                "CREATE_DELETE_SNAPSHOT", "LIST_SNAPSHOTS", "CLONE_VOLUME", "MODIFY_VOLUME"), types);
    }

    @Test
    void secretsInARequestNeverReachTheLog() throws Exception {
        start("--v", "5");
        var controller = ControllerGrpc.newBlockingStub(channel);
        assertThrows(StatusRuntimeException.class, () -> controller.createVolume(CreateVolumeRequest.newBuilder()
                .setName("pvc-7c1f")
                .putParameters("fsType", "xfs")
                .putSecrets("token", "s3cr3t-value-8d2e")
                .build()));
        server.awaitOutput("method=csi.v1.Controller/CreateVolume name=pvc-7c1f");
        String log = server.output();
        assertTrue(log.contains("name=pvc-7c1f"), "the call is logged with its volume name:\n" + log);
        assertTrue(log.contains("fsType"), "the request body is logged at --v=5:\n" + log);
        assertFalse(log.contains("s3cr3t-value-8d2e"), log);
        assertFalse(log.contains("token"), log);
    }
}
