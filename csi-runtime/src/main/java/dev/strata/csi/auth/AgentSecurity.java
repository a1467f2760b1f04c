package dev.strata.csi.auth;

import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.FlagSet;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.log.Log;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.GrpcSslContexts;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContext;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContextBuilder;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * How controller-server and the node agents trust each other: the shared token on every call,
 * over TLS unless plaintext is asked for explicitly (one machine, tests). With TLS, every agent server presents the same certificate, issued for
 * the name {@value #SERVER_NAME}, and clients check it against the CA; node IPs need not be in it.
 */
public record AgentSecurity(AgentToken token, Optional<SslContext> serverTls, Optional<SslContext> clientTls) {

    public static final String SERVER_NAME = "strata-agent";

    public static final Flag TOKEN_FILE = new Flag("agent-token-file", "AGENT_TOKEN_FILE", null,
            "file holding the shared secret controller and node agents authenticate each other with");
    public static final Flag TLS_CERT = new Flag("agent-tls-cert", "AGENT_TLS_CERT", "",
            "PEM certificate (for the name " + SERVER_NAME + ") the agent channel is served with; needed unless --agent-plaintext=true");
    public static final Flag TLS_KEY = new Flag("agent-tls-key", "AGENT_TLS_KEY", "",
            "PEM private key of --agent-tls-cert");
    public static final Flag TLS_CA = new Flag("agent-tls-ca", "AGENT_TLS_CA", "",
            "PEM CA certificate the other side's certificate must chain to");
    public static final Flag PLAINTEXT = Flag.bool("agent-plaintext", "AGENT_PLAINTEXT", false,
            "given (or =true): run the agent channel without TLS (the token then crosses the network in clear); for one machine only");

    public static List<Flag> flags() {
        return List.of(TOKEN_FILE, TLS_CERT, TLS_KEY, TLS_CA, PLAINTEXT);
    }

    public static AgentSecurity fromFlags(FlagSet.Values flags, Log log) throws UsageException {
        AgentToken token = AgentToken.fromFile(Path.of(flags.get(TOKEN_FILE)));
        String cert = flags.get(TLS_CERT);
        String key = flags.get(TLS_KEY);
        String ca = flags.get(TLS_CA);
        boolean plaintext = flags.booleanValue(PLAINTEXT);
        if (cert.isEmpty() && key.isEmpty() && ca.isEmpty()) {
            if (!plaintext) {
                throw new UsageException("the agent channel needs --agent-tls-cert, --agent-tls-key and --agent-tls-ca "
                        + "(hack/agent-credentials.sh makes them), or --agent-plaintext=true on a single machine");
            }
            return new AgentSecurity(token, Optional.empty(), Optional.empty());
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
            return new AgentSecurity(token, Optional.of(server), Optional.of(client));
        } catch (Exception e) {
            throw new UsageException("cannot load the agent TLS files: " + e.getMessage());
        }
    }

    /** A channel to the other side at {@code target} (host:port): TLS when configured. */
    public ManagedChannel channel(String target) {
        NettyChannelBuilder builder = NettyChannelBuilder.forTarget(target);
        if (clientTls.isPresent()) {
            builder.sslContext(clientTls.get()).overrideAuthority(SERVER_NAME);
        } else {
            builder.usePlaintext();
        }
        return builder.build();
    }
}
