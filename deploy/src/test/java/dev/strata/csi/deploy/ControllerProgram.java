package dev.strata.csi.deploy;

import dev.strata.csi.controller.ControllerServer;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * controller-server run as a child process on a socket of its own, with no node agent, to be asked
 * what the manifests and the docs are checked against: the program's answers, not a copy of them.
 */
final class ControllerProgram {

    /** What to ask the running controller over its CSI socket. */
    @FunctionalInterface
    interface Question<T> {
        T ask(ManagedChannel channel) throws Exception;
    }

    private ControllerProgram() {}

    static <T> T ask(Path dir, Question<T> question) throws Exception {
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
                return question.ask(channel);
            } finally {
                channel.shutdownNow();
            }
        }
    }
}
