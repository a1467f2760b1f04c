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
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import dev.strata.csi.flags.UsageException;
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

/**
 * The agent channel's TLS on a real server and client: the files read again when replaced, and a
 * node agent that takes calls with controller-server's client certificate only.
 */
class AgentSecurityTest {

    @TempDir
    Path dir;

    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    private final Log log = new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0);

    /** A CA rotation as docs/operations.md describes it: the clients trust the new CA from the next handshake on. */
    @Test
    void aReplacedCaFileIsTrustedByTheNextHandshake() throws Exception {
        Path oldCa = secret(credentials("old"), AgentSecurity.Side.NODE);
        Path newCa = secret(credentials("new"), AgentSecurity.Side.CONTROLLER);
        Path secret = dir.resolve("secret");
        SecretVolume.publish(secret, oldCa, "..1", List.of("token", "ca.crt", "tls.crt", "tls.key"));
        AgentSecurity client = security(AgentSecurity.Side.NODE, secret);
        // A registry already on the new CA's certificate.
        GrpcServer server = GrpcServer.onTcp(new InetSocketAddress("127.0.0.1", 0), security(AgentSecurity.Side.CONTROLLER, newCa).serverTls(),
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
            GrpcServer other = GrpcServer.onTcp(new InetSocketAddress("127.0.0.1", 0),
                    security(AgentSecurity.Side.CONTROLLER, newCa).serverTls(),
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

    /**
     * Only controller-server's certificate calls a node agent: without a client certificate, with
     * the node pair (not for clients: the handshake fails) or with a client certificate of the CA
     * for another name (the one pair every server shared before issue 40) the call is refused.
     */
    @Test
    void aNodeAgentTakesCallsWithTheControllersCertificateOnly() throws Exception {
        Path credentials = credentials("pairs");
        Path nodeSecret = secret(credentials, AgentSecurity.Side.NODE);
        AgentSecurity node = security(AgentSecurity.Side.NODE, nodeSecret);
        GrpcServer agent = GrpcServer.onTcp(new InetSocketAddress("127.0.0.1", 0), node.serverTls(),
                List.of(new IdentityService(PluginInfo.of("strata.csi.dev", "test"), List.of(), () -> true)), node.verifiers(log), log);
        try {
            assertEquals("strata.csi.dev", pluginName(security(AgentSecurity.Side.CONTROLLER, secret(credentials, AgentSecurity.Side.CONTROLLER)),
                    agent.port()), "controller-server's call");

            StatusRuntimeException none = assertThrows(StatusRuntimeException.class, () -> call(agent.port(), credentials, null, null));
            assertEquals(Status.Code.UNAUTHENTICATED, none.getStatus().getCode(), none.getStatus().toString());
            assertTrue(none.getStatus().getDescription().contains("no client certificate"), none.getStatus().toString());

            StatusRuntimeException nodePair = assertThrows(StatusRuntimeException.class, () -> call(agent.port(), credentials,
                    nodeSecret.resolve("tls.crt"), nodeSecret.resolve("tls.key")));
            assertEquals(Status.Code.UNAVAILABLE, nodePair.getStatus().getCode(), "the handshake refuses a server-only certificate");

            Path shared = Files.createDirectories(dir.resolve("shared"));
            Programs.run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", shared.resolve("tls.key").toString(),
                    "-out", shared.resolve("tls.csr").toString(), "-subj", "/CN=strata-agent");
            Files.writeString(shared.resolve("tls.ext"), "subjectAltName=DNS:strata-agent\nextendedKeyUsage=serverAuth,clientAuth\n");
            Programs.run("openssl", "x509", "-req", "-in", shared.resolve("tls.csr").toString(), "-CA", credentials.resolve("ca.crt").toString(),
                    "-CAkey", credentials.resolve("ca.key").toString(), "-CAcreateserial", "-out", shared.resolve("tls.crt").toString(),
                    "-days", "1", "-extfile", shared.resolve("tls.ext").toString());
            StatusRuntimeException otherName = assertThrows(StatusRuntimeException.class, () -> call(agent.port(), credentials,
                    shared.resolve("tls.crt"), shared.resolve("tls.key")));
            assertEquals(Status.Code.UNAUTHENTICATED, otherName.getStatus().getCode(), otherName.getStatus().toString());
            assertTrue(otherName.getStatus().getDescription().contains("does not name strata-controller"), otherName.getStatus().toString());
            String said = logged.toString(StandardCharsets.UTF_8);
            assertTrue(said.contains("refused a call on the agent channel"), said);
            assertTrue(!said.contains(Files.readString(credentials.resolve("token")).strip()), "no token in the log");
        } finally {
            agent.stop(Duration.ZERO);
        }
    }

    /** Each side serves its own pair: the other side's, given by mistake, is refused at start with a lead. */
    @Test
    void eachSideTakesItsOwnPairOnly() throws Exception {
        Path credentials = credentials("pairs");
        UsageException e = assertThrows(UsageException.class,
                () -> security(AgentSecurity.Side.CONTROLLER, secret(credentials, AgentSecurity.Side.NODE)));
        assertTrue(e.getMessage().contains("is not issued for the name strata-controller"), e.getMessage());
        assertThrows(UsageException.class, () -> security(AgentSecurity.Side.NODE, secret(credentials, AgentSecurity.Side.CONTROLLER)));
    }

    /**
     * Over TLS the controller sends no identity token (every node would receive it) and the agents
     * check none (the client certificate decides); identity tokens are checked against an issuer,
     * which a JWKS file does not name.
     */
    @Test
    void overTlsOnlyTheRegistryChecksTokensAndAlwaysTheirIssuer() throws Exception {
        Path credentials = credentials("pairs");
        Path controller = secret(credentials, AgentSecurity.Side.CONTROLLER);
        Path node = secret(credentials, AgentSecurity.Side.NODE);
        Path token = Files.writeString(dir.resolve("identity.token"), "x");
        Path keys = Files.writeString(dir.resolve("jwks.json"), "{\"keys\":[]}");
        UsageException sent = assertThrows(UsageException.class,
                () -> security(AgentSecurity.Side.CONTROLLER, controller, "--agent-identity-token-file", token.toString()));
        assertTrue(sent.getMessage().contains("client certificate"), sent.getMessage());
        assertThrows(UsageException.class, () -> security(AgentSecurity.Side.NODE, node, "--agent-identity-keys", keys.toString(),
                "--agent-identity-callers", "strata-system/strata-controller", "--agent-identity-issuer", "https://issuer"));
        UsageException noIssuer = assertThrows(UsageException.class, () -> security(AgentSecurity.Side.CONTROLLER, controller,
                "--agent-identity-keys", keys.toString(), "--agent-identity-callers", "strata-system/strata-node"));
        assertTrue(noIssuer.getMessage().contains("--agent-identity-issuer"), noIssuer.getMessage());

        AgentSecurity registry = security(AgentSecurity.Side.CONTROLLER, controller, "--agent-identity-keys", keys.toString(),
                "--agent-identity-callers", "strata-system/strata-node", "--agent-identity-issuer", "https://issuer");
        assertEquals(2, registry.verifiers(log).size(), "the shared token, then the node's identity");
        assertEquals(2, security(AgentSecurity.Side.NODE, node, "--agent-identity-token-file", token.toString()).verifiers(log).size(),
                "the shared token, then the controller's certificate");
    }

    private Path credentials(String name) throws Exception {
        Path script = Path.of(System.getProperty("user.dir")).getParent().resolve("hack/agent-credentials.sh");
        Path out = dir.resolve(name);
        Programs.run("bash", script.toString(), out.toString(), "1");
        return out;
    }

    /** {@code side}'s Secret, as deploy/kustomization.yaml makes it from {@code credentials}. */
    private Path secret(Path credentials, AgentSecurity.Side side) throws Exception {
        String pair = side == AgentSecurity.Side.CONTROLLER ? "controller" : "node";
        Path secret = dir.resolve(credentials.getFileName() + "-" + pair + "-secret");
        SecretVolume.publish(secret, SecretVolume.agentCredentials(credentials, pair), "..1");
        return secret;
    }

    private AgentSecurity security(AgentSecurity.Side side, Path files, String... more) throws Exception {
        FlagSet flags = new FlagSet("test", "test", AgentSecurity.flags());
        List<String> args = new java.util.ArrayList<>(List.of(
            "--agent-token-file", files.resolve("token").toString(), "--agent-tls-cert", files.resolve("tls.crt").toString(),
            "--agent-tls-key", files.resolve("tls.key").toString(), "--agent-tls-ca", files.resolve("ca.crt").toString()));
        args.addAll(List.of(more));
        FlagSet.Run run = (FlagSet.Run) flags.parse(args.toArray(String[]::new), Map.of());
        return AgentSecurity.fromFlags(side, run.values(), Map.of(), log);
    }

    /** GetPluginInfo with the shared token, over TLS with {@code cert} and {@code key} as the client certificate (null: none). */
    private static String call(int port, Path credentials, Path cert, Path key) throws Exception {
        var tls = GrpcSslContexts.forClient().trustManager(credentials.resolve("ca.crt").toFile());
        if (cert != null) {
            tls.keyManager(cert.toFile(), key.toFile());
        }
        ManagedChannel channel = NettyChannelBuilder.forAddress("127.0.0.1", port).overrideAuthority(AgentSecurity.NODE_NAME)
                .sslContext(tls.build()).build();
        try {
            return IdentityGrpc.newBlockingStub(channel).withCallCredentials(AgentToken.fromFile(credentials.resolve("token")).credentials())
                    .withDeadlineAfter(10, TimeUnit.SECONDS).getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName();
        } finally {
            channel.shutdownNow();
        }
    }

    /** GetPluginInfo over a new channel: a new TLS handshake. */
    private static String pluginName(AgentSecurity security, int port) {
        ManagedChannel channel = security.channel("127.0.0.1:" + port);
        try {
            return IdentityGrpc.newBlockingStub(channel).withCallCredentials(security.credentials()).withDeadlineAfter(10, TimeUnit.SECONDS)
                    .getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName();
        } finally {
            channel.shutdownNow();
        }
    }
}
