package dev.strata.csi.auth;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.IdentityGrpc;
import dev.strata.csi.flags.FlagSet;
import dev.strata.csi.identity.IdentityService;
import dev.strata.csi.identity.PluginInfo;
import dev.strata.csi.log.Log;
import dev.strata.csi.server.GrpcServer;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.SecretVolume;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The agent channel's TLS files read again when replaced, on a real TLS server and client. */
class AgentSecurityTest {

    @TempDir
    Path dir;

    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    private final Log log = new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0);

    /** A CA rotation as docs/operations.md describes it: the clients trust the new CA from the next handshake on. */
    @Test
    void aReplacedCaFileIsTrustedByTheNextHandshake() throws Exception {
        Path oldCa = credentials("old");
        Path newCa = credentials("new");
        Path secret = dir.resolve("secret");
        SecretVolume.publish(secret, oldCa, "..1", List.of("token", "ca.crt", "tls.crt", "tls.key"));
        AgentSecurity client = security(secret);
        // A server already on the new CA's certificate.
        GrpcServer server = GrpcServer.onTcp(new InetSocketAddress("127.0.0.1", 0), security(newCa).serverTls(),
                List.of(new IdentityService(PluginInfo.of("strata.csi.dev", "test"), List.of(), () -> true)), List.of(), log);
        try {
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> pluginName(client, server.port()));
            assertEquals(Status.Code.UNAVAILABLE, refused.getStatus().getCode(), "a certificate of an unknown CA");

            // Both CAs in ca.crt, as during a rotation.
            Path bundle = Files.createDirectories(dir.resolve("bundle"));
            for (String name : List.of("token", "tls.crt", "tls.key")) {
                Files.copy(oldCa.resolve(name), bundle.resolve(name));
            }
            Files.writeString(bundle.resolve("ca.crt"), Files.readString(oldCa.resolve("ca.crt")) + Files.readString(newCa.resolve("ca.crt")));
            SecretVolume.publish(secret, bundle, "..2", List.of("token", "ca.crt", "tls.crt", "tls.key"));
            assertEquals("strata.csi.dev", pluginName(client, server.port()));
            assertTrue(logged.toString(StandardCharsets.UTF_8).contains("agent TLS CA reloaded"), logged.toString(StandardCharsets.UTF_8));

            // A file that is no CA at all is reported, and the CAs read before stay.
            Path broken = Files.createDirectories(dir.resolve("broken"));
            for (String name : List.of("token", "tls.crt", "tls.key")) {
                Files.copy(oldCa.resolve(name), broken.resolve(name));
            }
            Files.writeString(broken.resolve("ca.crt"), "not a certificate\n");
            SecretVolume.publish(secret, broken, "..3", List.of("token", "ca.crt", "tls.crt", "tls.key"));
            // Another server: a session with the first could be resumed without looking at the certificate again.
            GrpcServer other = GrpcServer.onTcp(new InetSocketAddress("127.0.0.1", 0), security(newCa).serverTls(),
                    List.of(new IdentityService(PluginInfo.of("strata.csi.dev", "test"), List.of(), () -> true)), List.of(), log);
            try {
                assertEquals("strata.csi.dev", pluginName(client, other.port()));
            } finally {
                other.stop(Duration.ZERO);
            }
            assertTrue(logged.toString(StandardCharsets.UTF_8).contains("trusting the previous CAs"), logged.toString(StandardCharsets.UTF_8));
        } finally {
            server.stop(Duration.ZERO);
        }
    }

    private Path credentials(String name) throws Exception {
        Path script = Path.of(System.getProperty("user.dir")).getParent().resolve("hack/agent-credentials.sh");
        Path out = dir.resolve(name);
        Programs.run("bash", script.toString(), out.toString(), "1");
        return out;
    }

    private AgentSecurity security(Path files) throws Exception {
        FlagSet flags = new FlagSet("test", "test", AgentSecurity.flags());
        FlagSet.Run run = (FlagSet.Run) flags.parse(new String[] {
            "--agent-token-file", files.resolve("token").toString(), "--agent-tls-cert", files.resolve("tls.crt").toString(),
            "--agent-tls-key", files.resolve("tls.key").toString(), "--agent-tls-ca", files.resolve("ca.crt").toString()}, Map.of());
        return AgentSecurity.fromFlags(run.values(), Map.of(), log);
    }

    /** GetPluginInfo over a new channel: a new TLS handshake. */
    private static String pluginName(AgentSecurity security, int port) {
        ManagedChannel channel = security.channel("127.0.0.1:" + port);
        try {
            return IdentityGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS)
                    .getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName();
        } finally {
            channel.shutdownNow();
        }
    }
}
