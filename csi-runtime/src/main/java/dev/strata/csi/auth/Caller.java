package dev.strata.csi.auth;

import io.grpc.Context;
import java.time.Instant;
import java.util.Optional;

/**
 * Who made a call on the agent channel, as the ServiceAccount token it presented says, once the
 * token's signature, audience and times are checked.
 *
 * @param subject  {@code system:serviceaccount:<namespace>:<name>}
 * @param nodeName the node the caller's pod runs on (the {@code kubernetes.io.node.name} claim),
 *                 empty on clusters that do not issue it (before Kubernetes 1.30)
 * @param podUid   the caller's pod ({@code kubernetes.io.pod.uid}), empty when not issued
 * @param issuedAt when the token was issued
 */
public record Caller(String subject, Optional<String> nodeName, Optional<String> podUid, Instant issuedAt) {

    static final Context.Key<Caller> CURRENT = Context.key("strata-caller");

    /** The verified caller of the call being served; empty when the channel does not identify callers. */
    public static Optional<Caller> current() {
        return Optional.ofNullable(CURRENT.get());
    }
}
