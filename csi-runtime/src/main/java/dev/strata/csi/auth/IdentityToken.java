package dev.strata.csi.auth;

import io.grpc.CallCredentials;
import io.grpc.Metadata;
import io.grpc.Status;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Executor;

/**
 * The ServiceAccount token this side presents on the agent channel: a projected token kubelet
 * writes into the pod (audience of our own, bound to the pod and its node) and renews before it
 * expires, so it is read again at every call. It never reaches a log.
 */
public final class IdentityToken {

    private final Path file;

    public IdentityToken(Path file) {
        this.file = file;
    }

    /** Attaches the current token to outgoing calls; a call fails UNAUTHENTICATED when it cannot be read. */
    public CallCredentials credentials() {
        return new CallCredentials() {
            @Override
            public void applyRequestMetadata(RequestInfo info, Executor executor, MetadataApplier applier) {
                try {
                    Metadata headers = new Metadata();
                    headers.put(IdentityVerifier.HEADER, Files.readString(file).strip());
                    applier.apply(headers);
                } catch (IOException | IllegalArgumentException e) {
                    applier.fail(Status.UNAUTHENTICATED.withDescription("cannot read the identity token " + file + ": " + e.getMessage()));
                }
            }
        };
    }

    @Override
    public String toString() {
        return "IdentityToken[" + file + "]";
    }
}
