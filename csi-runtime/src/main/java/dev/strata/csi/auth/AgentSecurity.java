package dev.strata.csi.auth;

import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.FlagSet;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.log.Log;
import dev.strata.csi.server.GrpcServer;
import io.grpc.CallCredentials;
import io.grpc.CompositeCallCredentials;
import io.grpc.ManagedChannel;
import io.grpc.ServerInterceptor;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContext;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContextBuilder;
import java.nio.file.Path;
import java.time.Clock;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Optional;

/**
 * How controller-server and the node agents trust each other: the shared token on every call,
 * over TLS unless plaintext is asked for explicitly (one machine, tests). With TLS, every agent
 * server presents the same certificate, issued for the name {@value #SERVER_NAME}, and clients
 * check it against the CA; node IPs need not be in it. With per-node identity, every call also
 * carries the caller's ServiceAccount token ({@link IdentityToken}), which the other side checks
 * against the cluster's signing keys and the ServiceAccounts it accepts ({@link IdentityVerifier}):
 * the shared token and certificate say "one of ours", the identity token says which one.
 */
public record AgentSecurity(AgentToken token, Optional<IdentityToken> identity, Optional<IdentityVerifier> verifier,
        Optional<SslContext> serverTls, Optional<SslContext> clientTls) {

    public static final String SERVER_NAME = "strata-agent";

    public static final Flag TOKEN_FILE = Flag.of("agent-token-file", null,
            "file holding the shared secret controller and node agents authenticate each other with");
    public static final Flag TLS_CERT = Flag.of("agent-tls-cert", "",
            "PEM certificate (for the name " + SERVER_NAME + ") the agent channel is served with; needed unless --agent-plaintext=true");
    public static final Flag TLS_KEY = Flag.of("agent-tls-key", "",
            "PEM private key of --agent-tls-cert");
    public static final Flag TLS_CA = Flag.of("agent-tls-ca", "",
            "PEM CA certificate the other side's certificate must chain to");
    public static final Flag PLAINTEXT = Flag.bool("agent-plaintext", false,
            "given (or =true): run the agent channel without TLS (the token then crosses the network in clear); for one machine only");

    public static final Flag IDENTITY_TOKEN_FILE = Flag.of("agent-identity-token-file", "",
            "projected ServiceAccount token (audience --agent-identity-audience) this side presents on every agent call; "
                    + "empty: none");
    public static final Flag IDENTITY_KEYS = Flag.of("agent-identity-keys", "",
            "where the keys that sign the cluster's ServiceAccount tokens are: 'kubernetes' (the apiserver's /openid/v1/jwks, "
                    + "read from inside a pod), an https URL (read with the pod's ServiceAccount CA and token) or a JWKS file; "
                    + "empty: callers are not identified, the shared token alone is checked");
    public static final Flag IDENTITY_CALLERS = Flag.of("agent-identity-callers", "",
            "ServiceAccounts (namespace/name, comma-separated) whose tokens this side accepts calls with: on controller-server "
                    + "node-server's, on node-server controller-server's; needed with --agent-identity-keys");
    public static final Flag IDENTITY_AUDIENCE = Flag.of("agent-identity-audience", "strata.csi.dev",
            "audience the identity tokens are issued for");

    public static List<Flag> flags() {
        return List.of(TOKEN_FILE, TLS_CERT, TLS_KEY, TLS_CA, PLAINTEXT, IDENTITY_TOKEN_FILE, IDENTITY_KEYS, IDENTITY_CALLERS,
                IDENTITY_AUDIENCE);
    }

    public static AgentSecurity fromFlags(FlagSet.Values flags, Map<String, String> environment, Log log) throws UsageException {
        AgentToken token = AgentToken.fromFile(Path.of(flags.get(TOKEN_FILE)));
        String identityFile = flags.get(IDENTITY_TOKEN_FILE);
        Optional<IdentityToken> identity = identityFile.isEmpty() ? Optional.empty() : Optional.of(new IdentityToken(Path.of(identityFile)));
        Optional<IdentityVerifier> verifier = verifier(flags, environment, log);
        String cert = flags.get(TLS_CERT);
        String key = flags.get(TLS_KEY);
        String ca = flags.get(TLS_CA);
        boolean plaintext = flags.booleanValue(PLAINTEXT);
        if (cert.isEmpty() && key.isEmpty() && ca.isEmpty()) {
            if (!plaintext) {
                throw new UsageException("the agent channel needs --agent-tls-cert, --agent-tls-key and --agent-tls-ca "
                        + "(hack/agent-credentials.sh makes them), or --agent-plaintext=true on a single machine");
            }
            return new AgentSecurity(token, identity, verifier, Optional.empty(), Optional.empty());
        }
        if (plaintext) {
            throw new UsageException("--agent-plaintext=true contradicts the --agent-tls-* flags");
        }
        if (cert.isEmpty() || key.isEmpty() || ca.isEmpty()) {
            throw new UsageException("flags --agent-tls-cert, --agent-tls-key and --agent-tls-ca go together");
        }
        try {
            // Read again when the files are replaced (a renewed Secret): new handshakes use the new ones.
            SslContext server = GrpcSslContexts.configure(SslContextBuilder.forServer(
                    new ReloadingKeyManager(Path.of(cert), Path.of(key), log))).build();
            SslContext client = GrpcSslContexts.forClient().trustManager(new ReloadingTrustManager(Path.of(ca), log)).build();
            return new AgentSecurity(token, identity, verifier, Optional.of(server), Optional.of(client));
        } catch (Exception e) {
            throw new UsageException("cannot load the agent TLS files: " + e.getMessage());
        }
    }

    private static Optional<IdentityVerifier> verifier(FlagSet.Values flags, Map<String, String> environment, Log log)
            throws UsageException {
        String keys = flags.get(IDENTITY_KEYS);
        String callers = flags.get(IDENTITY_CALLERS);
        if (keys.isEmpty()) {
            if (!callers.isEmpty()) {
                throw new UsageException("--agent-identity-callers needs --agent-identity-keys to check the callers' tokens with");
            }
            log.warn("agent callers are not identified (no --agent-identity-keys): any holder of the shared agent secret and "
                    + "certificate can act as any node or as the controller");
            return Optional.empty();
        }
        Set<String> subjects = new LinkedHashSet<>();
        for (String account : callers.split(",", -1)) {
            String[] parts = account.strip().split("/", -1);
            if (parts.length != 2 || parts[0].isEmpty() || parts[1].isEmpty()) {
                throw new UsageException("--agent-identity-callers takes namespace/name of ServiceAccounts, comma-separated; got '"
                        + callers + "'");
            }
            subjects.add("system:serviceaccount:" + parts[0] + ":" + parts[1]);
        }
        IdentityVerifier verifier;
        try {
            verifier = new IdentityVerifier(SigningKeys.of(keys, environment, Clock.systemUTC()), flags.get(IDENTITY_AUDIENCE),
                    subjects, Clock.systemUTC(), log);
        } catch (IllegalArgumentException e) {
            throw new UsageException("--agent-identity-keys: " + e.getMessage());
        }
        verifier.readKeys();
        return Optional.of(verifier);
    }

    /** What this side attaches to its calls: the shared token, and its identity token when it has one. */
    public CallCredentials credentials() {
        return identity.<CallCredentials>map(id -> new CompositeCallCredentials(token.credentials(), id.credentials()))
                .orElse(token.credentials());
    }

    /**
     * What this side's agent-channel server checks on every call, outermost first: the shared
     * token, then (before any identity token is parsed) the caller's identity.
     */
    public List<ServerInterceptor> verifiers() {
        return verifier.map(v -> List.of(token.verifier(), v.interceptor())).orElse(List.of(token.verifier()));
    }

    /** A channel to the other side at {@code target} (host:port): TLS when configured. */
    public ManagedChannel channel(String target) {
        NettyChannelBuilder builder = NettyChannelBuilder.forTarget(target).flowControlWindow(GrpcServer.TCP_FLOW_CONTROL_WINDOW);
        if (clientTls.isPresent()) {
            builder.sslContext(clientTls.get()).overrideAuthority(SERVER_NAME);
        } else {
            builder.usePlaintext();
        }
        return builder.build();
    }
}
