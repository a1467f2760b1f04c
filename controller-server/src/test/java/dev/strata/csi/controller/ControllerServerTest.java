package dev.strata.csi.controller;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.GetPluginCapabilitiesRequest;
import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.GetPluginInfoResponse;
import csi.v1.Csi.PluginCapability;
import csi.v1.Csi.ProbeRequest;
import csi.v1.IdentityGrpc;
import dev.strata.csi.BuildInfo;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** controller-server as a real process, called over its unix socket. */
class ControllerServerTest {

    @TempDir
    Path dir;

    private ServerProcess server;
    private ManagedChannel channel;

    private void start(String... extraArgs) throws Exception {
        Path socket = dir.resolve("controller.sock");
        String[] args = new String[extraArgs.length + 2];
        args[0] = "--endpoint";
        args[1] = "unix://" + socket;
        System.arraycopy(extraArgs, 0, args, 2, extraArgs.length);
        server = ServerProcess.start(ControllerServer.class, args).awaitListening(socket);
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
    void identityNamesTheDriverAndOffersTheControllerService() throws Exception {
        start("--driver-name", "local.storage.example.com");
        var identity = IdentityGrpc.newBlockingStub(channel);
        GetPluginInfoResponse info = identity.getPluginInfo(GetPluginInfoRequest.getDefaultInstance());
        assertEquals("local.storage.example.com", info.getName());
        assertEquals(BuildInfo.version(), info.getVendorVersion());
        assertFalse(info.getVendorVersion().isBlank());
        List<PluginCapability> capabilities =
                identity.getPluginCapabilities(GetPluginCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList();
        assertEquals(List.of(PluginCapability.Service.Type.CONTROLLER_SERVICE),
                capabilities.stream().map(c -> c.getService().getType()).toList());
        assertTrue(identity.probe(ProbeRequest.getDefaultInstance()).getReady().getValue());
    }

    @Test
    void controllerAdvertisesNothingItCannotDo() throws Exception {
        start();
        var controller = ControllerGrpc.newBlockingStub(channel);
        assertEquals(0, controller.controllerGetCapabilities(ControllerGetCapabilitiesRequest.getDefaultInstance())
                .getCapabilitiesCount());
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
                () -> controller.createVolume(CreateVolumeRequest.newBuilder().setName("pvc-1").build()));
        assertEquals(Status.Code.UNIMPLEMENTED, e.getStatus().getCode());
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
        server.awaitOutput("code=UNIMPLEMENTED");
        String log = server.output();
        assertTrue(log.contains("name=pvc-7c1f"), "the call is logged with its volume name:\n" + log);
        assertTrue(log.contains("fsType"), "the request body is logged at --v=5:\n" + log);
        assertFalse(log.contains("s3cr3t-value-8d2e"), log);
        assertFalse(log.contains("token"), log);
    }
}
