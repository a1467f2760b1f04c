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
import io.grpc.netty.shaded.io.netty.handler.ssl.ClientAuth;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContext;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContextBuilder;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Optional;

/**
 * How controller-server and the node agents trust each other (docs/design.md "Security"): the
 * shared token on every call, over TLS unless plaintext is asked for explicitly (one machine,
 * tests). With TLS, each {@link Side} has a key pair of its own, issued by one CA for its name:
 * the node agents present {@value #NODE_NAME} (a server certificate only), controller-server
 * {@value #CONTROLLER_NAME}, as the registry's server and as the client of every agent call. A
 * node agent takes calls only from a client certificate that names the controller
 * ({@link ControllerCertificate}), which no node holds: nothing a node holds or receives lets it
 * call another node's agent. The other way, each call to the registry carries the node's
 * ServiceAccount token ({@link IdentityToken}), which the controller checks against the
 * cluster's signing keys ({@link IdentityVerifier}): it says which node calls. Node IPs need not
 * be in any certificate: clients check the name of the side they call.
 */
public record AgentSecurity(Side side, AgentToken token, Optional<IdentityToken> identity, Optional<IdentityVerifier> verifier,
        Optional<SslContext> serverTls, Optional<SslContext> clientTls) {

    public static final String NODE_NAME = "strata-agent";
    public static final String CONTROLLER_NAME = "strata-controller";

    /** Which server this is, and so which certificate it holds and which one it expects of the other side. */
    public enum Side {
        /** controller-server: serves the agent registry, calls the node agents with its client certificate. */
        CONTROLLER(CONTROLLER_NAME, NODE_NAME),
        /** node-server: serves its agent to the controller's certificate only, calls the registry with its identity token. */
        NODE(NODE_NAME, CONTROLLER_NAME);

        final String name;
        final String peer;

        Side(String name, String peer) {
            this.name = name;
            this.peer = peer;
        }
    }

    public static final Flag TOKEN_FILE = Flag.of("agent-token-file", null,
            "file holding the shared secret controller and node agents authenticate each other with");
    public static final Flag TLS_CERT = Flag.of("agent-tls-cert", "",
            "PEM certificate the agent channel is served with (node-server: the node pair's, for the name " + NODE_NAME
                    + "; controller-server: the controller pair's, for " + CONTROLLER_NAME + ", also its client certificate); "
                    + "needed unless --agent-plaintext=true");
    public static final Flag TLS_KEY = Flag.of("agent-tls-key", "",
            "PEM private key of --agent-tls-cert");
    public static final Flag TLS_CA = Flag.of("agent-tls-ca", "",
            "PEM CA certificate the other side's certificate must chain to");
    public static final Flag PLAINTEXT = Flag.bool("agent-plaintext", false,
            "given (or =true): run the agent channel without TLS (the token then crosses the network in clear); for one machine only");

    public static final Flag IDENTITY_TOKEN_FILE = Flag.of("agent-identity-token-file", "",
            "projected ServiceAccount token (audience --agent-identity-audience) node-server presents on every call to the "
                    + "registry (controller-server: only with --agent-plaintext=true; over TLS its client certificate proves it); "
                    + "empty: none");
    public static final Flag IDENTITY_KEYS = Flag.of("agent-identity-keys", "",
            "where the keys that sign the cluster's ServiceAccount tokens are: 'kubernetes' (the apiserver's /openid/v1/jwks, "
                    + "read from inside a pod), an https URL (read with the pod's ServiceAccount CA and token) or a JWKS file; "
                    + "empty: callers are not identified, the shared token alone is checked");
    public static final Flag IDENTITY_CALLERS = Flag.of("agent-identity-callers", "",
            "ServiceAccounts (namespace/name, comma-separated) whose tokens this side accepts calls with: on controller-server "
                    + "node-server's (on node-server, only with --agent-plaintext=true: controller-server's); needed with "
                    + "--agent-identity-keys");
    public static final Flag IDENTITY_AUDIENCE = Flag.of("agent-identity-audience", "strata.csi.dev",
            "audience the identity tokens are issued for");
    public static final Flag IDENTITY_ISSUER = Flag.of("agent-identity-issuer", "",
            "issuer the identity tokens must name (their iss claim); empty: the issuer the apiserver's "
                    + "/.well-known/openid-configuration names (with --agent-identity-keys=kubernetes or an https URL; "
                    + "needed with a JWKS file)");

    public static List<Flag> flags() {
        return List.of(TOKEN_FILE, TLS_CERT, TLS_KEY, TLS_CA, PLAINTEXT, IDENTITY_TOKEN_FILE, IDENTITY_KEYS, IDENTITY_CALLERS,
                IDENTITY_AUDIENCE, IDENTITY_ISSUER);
    }

    public static AgentSecurity fromFlags(Side side, FlagSet.Values flags, Map<String, String> environment, Log log)
            throws UsageException {
        AgentToken token = AgentToken.fromFile(Path.of(flags.get(TOKEN_FILE)));
        String identityFile = flags.get(IDENTITY_TOKEN_FILE);
        Optional<IdentityToken> identity = identityFile.isEmpty() ? Optional.empty() : Optional.of(new IdentityToken(Path.of(identityFile)));
        String cert = flags.get(TLS_CERT);
        String key = flags.get(TLS_KEY);
        String ca = flags.get(TLS_CA);
        boolean plaintext = flags.booleanValue(PLAINTEXT);
        if (cert.isEmpty() && key.isEmpty() && ca.isEmpty()) {
            if (!plaintext) {
                throw new UsageException("the agent channel needs --agent-tls-cert, --agent-tls-key and --agent-tls-ca "
                        + "(hack/agent-credentials.sh makes them), or --agent-plaintext=true on a single machine");
            }
            return new AgentSecurity(side, token, identity, verifier(side, false, flags, environment, log), Optional.empty(),
                    Optional.empty());
        }
        if (plaintext) {
            throw new UsageException("--agent-plaintext=true contradicts the --agent-tls-* flags");
        }
        if (cert.isEmpty() || key.isEmpty() || ca.isEmpty()) {
            throw new UsageException("flags --agent-tls-cert, --agent-tls-key and --agent-tls-ca go together");
        }
        // Over TLS the controller's client certificate proves it to the agents: a token it sent along
        // would be a credential every node receives, and the agents have nothing to check it for.
        if (side == Side.CONTROLLER && identity.isPresent()) {
            throw new UsageException("--agent-identity-token-file: over TLS controller-server proves itself to the node agents with "
                    + "its client certificate and sends no identity token (a token sent to every node would be worth something "
                    + "to each of them)");
        }
        if (side == Side.NODE && !flags.get(IDENTITY_KEYS).isEmpty()) {
            throw new UsageException("--agent-identity-keys: over TLS a node agent takes calls from controller-server's client "
                    + "certificate only and checks no identity token; the flag is for controller-server, or --agent-plaintext=true");
        }
        Optional<IdentityVerifier> verifier = verifier(side, true, flags, environment, log);
        try {
            // Read again when the files are replaced (a renewed Secret): new handshakes use the new ones.
            ReloadingKeyManager pair = new ReloadingKeyManager(Path.of(cert), Path.of(key), side.name, log);
            ReloadingTrustManager trust = new ReloadingTrustManager(Path.of(ca), log);
            SslContextBuilder server = SslContextBuilder.forServer(pair);
            SslContextBuilder client = GrpcSslContexts.forClient().trustManager(trust);
            if (side == Side.NODE) {
                // Asked, not required, at the handshake: a caller without one is told why (UNAUTHENTICATED) by
                // ControllerCertificate, not cut off. A certificate that is presented must chain to the CA and be
                // for clients (the JDK checks its key usage), or the handshake fails.
                server.trustManager(trust).clientAuth(ClientAuth.OPTIONAL);
            } else {
                client.keyManager(pair);
            }
            return new AgentSecurity(side, token, identity, verifier, Optional.of(GrpcSslContexts.configure(server).build()),
                    Optional.of(client.build()));
        } catch (Exception e) {
            throw new UsageException("cannot load the agent TLS files: " + e.getMessage());
        }
    }

    private static Optional<IdentityVerifier> verifier(Side side, boolean tls, FlagSet.Values flags, Map<String, String> environment,
            Log log) throws UsageException {
        String keys = flags.get(IDENTITY_KEYS);
        String callers = flags.get(IDENTITY_CALLERS);
        if (keys.isEmpty()) {
            if (!callers.isEmpty()) {
                throw new UsageException("--agent-identity-callers needs --agent-identity-keys to check the callers' tokens with");
            }
            if (side == Side.NODE && tls) {
                return Optional.empty(); // the controller's client certificate identifies it
            }
            log.warn("agent callers are not identified (no --agent-identity-keys): any holder of the shared agent secret "
                    + (tls ? "can register as any node" : "can act as any node or as the controller"));
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
            SigningKeys signingKeys = SigningKeys.of(keys, environment, Clock.systemUTC());
            String issuer = flags.get(IDENTITY_ISSUER);
            if (issuer.isEmpty() && !signingKeys.discoversIssuer()) {
                throw new UsageException("--agent-identity-issuer is needed with a JWKS file (--agent-identity-keys=" + keys
                        + "): the issuer is read from the apiserver only with 'kubernetes' or an https URL");
            }
            verifier = new IdentityVerifier(signingKeys, issuer.isEmpty() ? Optional.empty() : Optional.of(issuer),
                    flags.get(IDENTITY_AUDIENCE), subjects, Clock.systemUTC(), log);
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
     * token, then (before any identity token is parsed) the caller: on a node agent over TLS the
     * controller's client certificate, otherwise its identity token when identities are checked.
     */
    public List<ServerInterceptor> verifiers(Log log) {
        List<ServerInterceptor> checks = new ArrayList<>(List.of(token.verifier()));
        if (side == Side.NODE && serverTls.isPresent()) {
            checks.add(ControllerCertificate.interceptor(log));
        }
        verifier.ifPresent(v -> checks.add(v.interceptor()));
        return List.copyOf(checks);
    }

    /** A channel to the other side at {@code target} (host:port): TLS when configured. */
    public ManagedChannel channel(String target) {
        NettyChannelBuilder builder = NettyChannelBuilder.forTarget(target).flowControlWindow(GrpcServer.TCP_FLOW_CONTROL_WINDOW);
        if (clientTls.isPresent()) {
            builder.sslContext(clientTls.get()).overrideAuthority(side.peer);
        } else {
            builder.usePlaintext();
        }
        return builder.build();
    }
}
