package dev.strata.csi.auth;

import dev.strata.csi.flags.UsageException;
import io.grpc.CallCredentials;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.concurrent.Executor;

/**
 * The shared secret that controller-server and the node agents present to each other on every
 * call (a Kubernetes Secret mounted as a file in a cluster). A call without it, or with another
 * one, is answered UNAUTHENTICATED before any handler runs. The token never reaches a log.
 */
public final class AgentToken {

    private static final Metadata.Key<String> AUTHORIZATION =
            Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);
    private static final String BEARER = "Bearer ";
    private static final int MIN_LENGTH = 16;

    private final byte[] token;

    private AgentToken(byte[] token) {
        this.token = token;
    }

    /** Reads the token from {@code file}; surrounding whitespace (a trailing newline) is ignored. */
    public static AgentToken fromFile(Path file) throws UsageException {
        String value;
        try {
            value = Files.readString(file, StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            throw new UsageException("cannot read agent token file " + file + ": " + e.getMessage());
        }
        if (value.length() < MIN_LENGTH || !value.chars().allMatch(c -> c > ' ' && c < 0x7f)) {
            throw new UsageException("agent token in " + file + " must be at least " + MIN_LENGTH
                    + " printable characters without spaces");
        }
        return new AgentToken(value.getBytes(StandardCharsets.US_ASCII));
    }

    /** Rejects calls that do not carry this token. */
    public ServerInterceptor verifier() {
        return new ServerInterceptor() {
            @Override
            public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(
                    ServerCall<ReqT, RespT> call, Metadata headers, ServerCallHandler<ReqT, RespT> next) {
                String presented = headers.get(AUTHORIZATION);
                boolean valid = presented != null && presented.startsWith(BEARER) && MessageDigest.isEqual(
                        token, presented.substring(BEARER.length()).getBytes(StandardCharsets.US_ASCII));
                if (!valid) {
                    call.close(Status.UNAUTHENTICATED.withDescription("missing or wrong agent token"), new Metadata());
                    return new ServerCall.Listener<>() {};
                }
                return next.startCall(call, headers);
            }
        };
    }

    /** Attaches this token to outgoing calls. */
    public CallCredentials credentials() {
        String value = BEARER + new String(token, StandardCharsets.US_ASCII);
        return new CallCredentials() {
            @Override
            public void applyRequestMetadata(RequestInfo info, Executor executor, MetadataApplier applier) {
                Metadata headers = new Metadata();
                headers.put(AUTHORIZATION, value);
                applier.apply(headers);
            }
        };
    }

    @Override
    public String toString() {
        return "AgentToken[redacted]";
    }
}
