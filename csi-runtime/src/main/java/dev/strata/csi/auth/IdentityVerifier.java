package dev.strata.csi.auth;

import com.nimbusds.jose.JOSEException;
import com.nimbusds.jose.JWSAlgorithm;
import com.nimbusds.jose.JWSVerifier;
import com.nimbusds.jose.crypto.ECDSAVerifier;
import com.nimbusds.jose.crypto.RSASSAVerifier;
import com.nimbusds.jose.jwk.ECKey;
import com.nimbusds.jose.jwk.JWK;
import com.nimbusds.jose.jwk.RSAKey;
import com.nimbusds.jwt.JWTClaimsSet;
import com.nimbusds.jwt.SignedJWT;
import dev.strata.csi.log.Log;
import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.io.IOException;
import java.text.ParseException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Checks the ServiceAccount token a caller on the agent channel presents ({@link IdentityToken}):
 * signed by one of the cluster's {@link SigningKeys} (RS256 or ES256, as the apiserver signs), by
 * the cluster's issuer, for our audience, current, and of one of the ServiceAccounts this side
 * accepts calls from. Anything else is UNAUTHENTICATED before a handler runs; the token never reaches a log.
 */
public final class IdentityVerifier {

    static final Metadata.Key<String> HEADER = Metadata.Key.of("strata-identity", Metadata.ASCII_STRING_MARSHALLER);
    /** Clocks of the apiserver and this node may differ a little. */
    private static final Duration LEEWAY = Duration.ofSeconds(60);
    private static final Set<JWSAlgorithm> ALGORITHMS = Set.of(JWSAlgorithm.RS256, JWSAlgorithm.ES256);

    /** A token that does not identify an accepted caller; the message says why, for the caller and the log. */
    public static final class Refused extends Exception {
        Refused(String message) {
            super(message);
        }
    }

    private final SigningKeys keys;
    /** The issuer named on the command line; empty: the one the keys' discovery document names. */
    private final Optional<String> issuer;
    private final String audience;
    private final Set<String> callers;
    private final Clock clock;
    private final Log log;

    /**
     * @param issuer  the issuer tokens must name; empty: the one {@code keys} read from the cluster
     * @param callers the subjects ({@code system:serviceaccount:<namespace>:<name>}) whose tokens are accepted
     */
    public IdentityVerifier(SigningKeys keys, Optional<String> issuer, String audience, Set<String> callers, Clock clock, Log log) {
        this.keys = keys;
        this.issuer = issuer;
        this.audience = audience;
        this.callers = Set.copyOf(callers);
        this.clock = clock;
        this.log = log;
    }

    /** The caller {@code token} identifies. */
    public Caller verify(String token) throws Refused {
        SignedJWT jwt;
        JWTClaimsSet claims;
        try {
            jwt = SignedJWT.parse(token);
            claims = jwt.getJWTClaimsSet();
        } catch (ParseException e) {
            throw new Refused("the identity token is not a signed JWT");
        }
        if (!ALGORITHMS.contains(jwt.getHeader().getAlgorithm())) {
            throw new Refused("the identity token is signed with " + jwt.getHeader().getAlgorithm() + ", not RS256 or ES256");
        }
        JWK key;
        try {
            key = keys.key(jwt.getHeader().getKeyID()).orElseThrow(() -> new Refused("the identity token is signed with key "
                    + jwt.getHeader().getKeyID() + ", which is not among the keys the cluster publishes at " + keys));
        } catch (IOException e) {
            // Not a wrong key: the keys are not known, and the message says why (the operator's lead).
            throw new Refused(e.getMessage());
        }
        try {
            if (!jwt.verify(verifier(key))) {
                throw new Refused("the identity token's signature does not verify");
            }
        } catch (JOSEException e) {
            throw new Refused("the identity token's signature cannot be checked: " + e.getMessage());
        }
        String expected;
        try {
            expected = issuer.isPresent() ? issuer.get() : keys.issuer();
        } catch (IOException e) {
            throw new Refused(e.getMessage());
        }
        if (!expected.equals(claims.getIssuer())) {
            throw new Refused("the identity token is issued by " + claims.getIssuer() + ", not by the cluster's issuer " + expected);
        }
        if (claims.getAudience() == null || !claims.getAudience().contains(audience)) {
            throw new Refused("the identity token is not issued for the audience " + audience);
        }
        Instant now = clock.instant();
        if (claims.getExpirationTime() == null || claims.getExpirationTime().toInstant().plus(LEEWAY).isBefore(now)) {
            throw new Refused("the identity token has expired");
        }
        if (claims.getNotBeforeTime() != null && claims.getNotBeforeTime().toInstant().minus(LEEWAY).isAfter(now)) {
            throw new Refused("the identity token is not valid yet");
        }
        String subject = claims.getSubject();
        if (subject == null || !callers.contains(subject)) {
            throw new Refused("the identity token's ServiceAccount " + subject + " may not call here");
        }
        Map<String, Object> kubernetes;
        try {
            kubernetes = claims.getJSONObjectClaim("kubernetes.io");
        } catch (ParseException e) {
            throw new Refused("the identity token's kubernetes.io claim is not an object");
        }
        Date issued = claims.getIssueTime();
        return new Caller(subject, nested(kubernetes, "node", "name"), nested(kubernetes, "pod", "uid"),
                issued == null ? Instant.EPOCH : issued.toInstant());
    }

    private static JWSVerifier verifier(JWK key) throws JOSEException, Refused {
        if (key instanceof RSAKey rsa) {
            return new RSASSAVerifier(rsa);
        }
        if (key instanceof ECKey ec) {
            return new ECDSAVerifier(ec);
        }
        throw new Refused("the cluster's signing key " + key.getKeyID() + " is of type " + key.getKeyType() + ", not RSA or EC");
    }

    private static Optional<String> nested(Map<String, Object> claim, String object, String field) {
        if (claim != null && claim.get(object) instanceof Map<?, ?> inner && inner.get(field) instanceof String value
                && !value.isEmpty()) {
            return Optional.of(value);
        }
        return Optional.empty();
    }

    /**
     * Reads the cluster's signing keys now and says in the log whether that worked, so that a
     * server that cannot read them says so at start, not only at the first call it refuses.
     */
    public void readKeys() {
        try {
            int count = keys.read();
            log.info("read the cluster's token signing keys", "keys", keys, "count", count, "issuer",
                    issuer.isPresent() ? issuer.get() : keys.issuer());
        } catch (IOException e) {
            log.warn("cannot read the cluster's token signing keys or issuer: agent calls are refused until they can be read",
                    "error", e.getMessage());
        }
    }

    /** Refuses calls without an accepted caller's token; the handlers find the caller in {@link Caller#current()}. */
    public ServerInterceptor interceptor() {
        return new ServerInterceptor() {
            @Override
            public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(
                    ServerCall<ReqT, RespT> call, Metadata headers, ServerCallHandler<ReqT, RespT> next) {
                String token = headers.get(HEADER);
                try {
                    if (token == null) {
                        throw new Refused("the call carries no identity token");
                    }
                    Caller caller = verify(token);
                    return Contexts.interceptCall(Context.current().withValue(Caller.CURRENT, caller), call, headers, next);
                } catch (Refused e) {
                    log.warn("refused a call on the agent channel", "method", call.getMethodDescriptor().getFullMethodName(),
                            "reason", e.getMessage());
                    call.close(Status.UNAUTHENTICATED.withDescription(e.getMessage()), new Metadata());
                    return new ServerCall.Listener<>() {};
                }
            }
        };
    }
}
