package dev.strata.csi.testing;

import com.nimbusds.jose.JOSEException;
import com.nimbusds.jose.JWSAlgorithm;
import com.nimbusds.jose.JWSHeader;
import com.nimbusds.jose.crypto.RSASSASigner;
import com.nimbusds.jose.crypto.RSASSAVerifier;
import com.nimbusds.jose.jwk.JWKSet;
import com.nimbusds.jose.jwk.RSAKey;
import com.nimbusds.jose.jwk.gen.RSAKeyGenerator;
import com.nimbusds.jwt.JWTClaimsSet;
import com.nimbusds.jwt.SignedJWT;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Date;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A TEST token issuer standing in for the Kubernetes apiserver, which cannot run here: it signs
 * ServiceAccount tokens shaped as kubelet's projected tokens are (RS256, a key id, audience,
 * sub, iat/nbf/exp, and the kubernetes.io claim naming namespace, ServiceAccount, pod and node),
 * and writes its public key as a JSON Web Key Set, as the apiserver serves /openid/v1/jwks.
 */
public final class TestIssuer {

    /** The issuer its tokens name (what kube-apiserver's --service-account-issuer says). */
    public static final String ISSUER = "https://test-issuer.invalid";

    /** What a token says; {@code node} empty as on clusters before Kubernetes 1.30. */
    public record Claims(String issuer, String namespace, String account, Optional<String> node, String podUid, String audience,
            Instant issued, Duration lifetime) {

        public static Claims of(String namespace, String account, String node, String podUid) {
            return new Claims(ISSUER, namespace, account, Optional.of(node), podUid, "strata.csi.dev", Instant.now(), Duration.ofHours(1));
        }

        public Claims issued(Instant at) {
            return new Claims(issuer, namespace, account, node, podUid, audience, at, lifetime);
        }

        public Claims audience(String other) {
            return new Claims(issuer, namespace, account, node, podUid, other, issued, lifetime);
        }

        public Claims withoutNode() {
            return new Claims(issuer, namespace, account, Optional.empty(), podUid, audience, issued, lifetime);
        }

        /** As if issued by another issuer (another cluster), with this issuer's key. */
        public Claims issuer(String other) {
            return new Claims(other, namespace, account, node, podUid, audience, issued, lifetime);
        }
    }

    private final RSAKey key;

    public TestIssuer(String keyId) {
        try {
            key = new RSAKeyGenerator(2048).keyID(keyId).generate();
        } catch (JOSEException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Writes the public key as a JWKS document to {@code file}. */
    public Path writeKeys(Path file) throws IOException {
        return Files.writeString(file, keys());
    }

    public String keys() {
        return new JWKSet(key.toPublicJWK()).toString();
    }

    /**
     * Whether {@code token} is one of this issuer's, for {@code audience} and current: how the
     * apiserver authenticates a ServiceAccount token presented as a bearer (its own audience).
     */
    public boolean issued(String token, String audience) {
        try {
            SignedJWT jwt = SignedJWT.parse(token);
            JWTClaimsSet claims = jwt.getJWTClaimsSet();
            return jwt.verify(new RSASSAVerifier(key.toRSAPublicKey())) && claims.getAudience().contains(audience)
                    && claims.getExpirationTime() != null && claims.getExpirationTime().after(new Date());
        } catch (java.text.ParseException | JOSEException e) {
            return false;
        }
    }

    public String token(Claims claims) {
        Map<String, Object> kubernetes = new LinkedHashMap<>();
        kubernetes.put("namespace", claims.namespace());
        kubernetes.put("serviceaccount", Map.of("name", claims.account(), "uid", "sa-uid-" + claims.account()));
        kubernetes.put("pod", Map.of("name", "pod-" + claims.podUid(), "uid", claims.podUid()));
        claims.node().ifPresent(node -> kubernetes.put("node", Map.of("name", node, "uid", "node-uid-" + node)));
        JWTClaimsSet set = new JWTClaimsSet.Builder()
                .issuer(claims.issuer())
                .audience(List.of(claims.audience()))
                .subject("system:serviceaccount:" + claims.namespace() + ":" + claims.account())
                .issueTime(Date.from(claims.issued()))
                .notBeforeTime(Date.from(claims.issued()))
                .expirationTime(Date.from(claims.issued().plus(claims.lifetime())))
                .claim("kubernetes.io", kubernetes)
                .build();
        SignedJWT jwt = new SignedJWT(new JWSHeader.Builder(JWSAlgorithm.RS256).keyID(key.getKeyID()).build(), set);
        try {
            jwt.sign(new RSASSASigner(key));
        } catch (JOSEException e) {
            throw new IllegalStateException(e);
        }
        return jwt.serialize();
    }
}
