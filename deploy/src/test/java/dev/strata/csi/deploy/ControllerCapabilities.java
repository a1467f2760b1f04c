package dev.strata.csi.deploy;

import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import dev.strata.csi.controller.ControllerServer;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * What controller-server advertises in ControllerGetCapabilities, asked of the real program on a
 * socket of its own: the sidecars of the controller pod must match it (a csi-snapshotter beside a
 * driver without CREATE_DELETE_SNAPSHOT exits; snapshots advertised without it are never taken).
 */
final class ControllerCapabilities {

    private ControllerCapabilities() {}

    static Set<String> advertised(Path dir) throws Exception {
        Path socket = dir.resolve("controller.sock");
        Path token = Files.writeString(dir.resolve("token"), "deploy-test-token");
        int registryPort;
        try (ServerSocket free = new ServerSocket(0)) {
            registryPort = free.getLocalPort();
        }
        try (ServerProcess server = ServerProcess.start(ControllerServer.class, "--endpoint", "unix://" + socket,
                "--agent-token-file", token.toString(), "--agent-registry-address", "127.0.0.1:" + registryPort,
                "--agent-plaintext", "true").awaitListening(socket)) {
            ManagedChannel channel = Sockets.channel(socket);
            try {
                Set<String> types = new LinkedHashSet<>();
                ControllerGrpc.newBlockingStub(channel).controllerGetCapabilities(ControllerGetCapabilitiesRequest.getDefaultInstance())
                        .getCapabilitiesList().forEach(capability -> types.add(capability.getRpc().getType().name()));
                return types;
            } finally {
                channel.shutdownNow();
            }
        }
    }
}
