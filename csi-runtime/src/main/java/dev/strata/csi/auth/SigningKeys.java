package dev.strata.csi.auth;

import com.nimbusds.jose.jwk.JWK;
import com.nimbusds.jose.jwk.JWKSet;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.text.ParseException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Optional;
import javax.net.ssl.SSLContext;

/**
 * The public keys the cluster signs ServiceAccount tokens with (a JSON Web Key Set, as the
 * apiserver publishes it at /openid/v1/jwks). Read at the first token and again when a token
 * names a key not seen yet (the apiserver's keys were rotated), at most every {@link #REFETCH}.
 */
public final class SigningKeys {

    /** Where a pod finds its own ServiceAccount's CA and token, to read the keys from the apiserver. */
    public static final Path SERVICE_ACCOUNT_DIR = Path.of("/var/run/secrets/kubernetes.io/serviceaccount");
    static final Duration REFETCH = Duration.ofSeconds(30);

    /** Reads the key set's JSON. */
    @FunctionalInterface
    interface Source {
        String read() throws IOException;
    }

    private final String where;
    private final Source source;
    private final Clock clock;
    private JWKSet keys;
    private Instant readAt = Instant.MIN;

    SigningKeys(String where, Source source, Clock clock) {
        this.where = where;
        this.source = source;
        this.clock = clock;
    }

    /**
     * The keys {@code value} names: {@code kubernetes} (the apiserver of the cluster this pod runs
     * in), an https URL (read with this pod's ServiceAccount CA and token), or a JWKS file.
     */
    public static SigningKeys of(String value, Map<String, String> environment, Clock clock) {
        if (value.equals("kubernetes")) {
            String host = environment.getOrDefault("KUBERNETES_SERVICE_HOST", "");
            String port = environment.getOrDefault("KUBERNETES_SERVICE_PORT", "443");
            if (host.isEmpty()) {
                throw new IllegalArgumentException("'kubernetes' reads the keys from the apiserver, and only inside a pod: "
                        + "KUBERNETES_SERVICE_HOST is not set");
            }
            String hostPart = host.contains(":") ? "[" + host + "]" : host;
            return fromUrl(URI.create("https://" + hostPart + ":" + port + "/openid/v1/jwks"), SERVICE_ACCOUNT_DIR, clock);
        }
        if (value.startsWith("https://")) {
            return fromUrl(URI.create(value), SERVICE_ACCOUNT_DIR, clock);
        }
        if (value.contains("://")) {
            throw new IllegalArgumentException("signing keys are read over https only, got " + value);
        }
        Path file = Path.of(value);
        return new SigningKeys(file.toString(), () -> Files.readString(file), clock);
    }

    /** Keys read from {@code uri} with the CA and bearer token in {@code serviceAccountDir} (ca.crt, token). */
    static SigningKeys fromUrl(URI uri, Path serviceAccountDir, Clock clock) {
        return new SigningKeys(uri.toString(), () -> {
            HttpClient client = HttpClient.newBuilder()
                    .sslContext(trusting(serviceAccountDir.resolve("ca.crt")))
                    .connectTimeout(Duration.ofSeconds(10))
                    .build();
            String bearer = Files.readString(serviceAccountDir.resolve("token")).strip();
            HttpRequest request = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10))
                    .header("Authorization", "Bearer " + bearer).header("Accept", "application/json").GET().build();
            try {
                HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
                if (response.statusCode() != 200) {
                    throw new IOException("HTTP " + response.statusCode() + " from " + uri
                            + (response.statusCode() == 403 ? " (the ServiceAccount needs the system:service-account-issuer-discovery role)" : ""));
                }
                return response.body();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted reading " + uri);
            } finally {
                client.close();
            }
        }, clock);
    }

    private static SSLContext trusting(Path caFile) throws IOException {
        try {
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(null, PemFiles.trustManagers(caFile), null);
            return context;
        } catch (GeneralSecurityException e) {
            throw new IOException("cannot use CA file " + caFile + ": " + e.getMessage());
        }
    }

    /** The key with id {@code keyId} (or the only key, for a token that names none); read again once if not known. */
    synchronized Optional<JWK> key(String keyId) throws IOException {
        Optional<JWK> known = find(keyId);
        if (known.isEmpty() && !clock.instant().isBefore(readAt.plus(REFETCH))) {
            read();
            known = find(keyId);
        }
        return known;
    }

    private Optional<JWK> find(String keyId) {
        if (keys == null) {
            return Optional.empty();
        }
        if (keyId == null) {
            return keys.getKeys().size() == 1 ? Optional.of(keys.getKeys().getFirst()) : Optional.empty();
        }
        return Optional.ofNullable(keys.getKeyByKeyId(keyId));
    }

    private void read() throws IOException {
        readAt = clock.instant();
        try {
            keys = JWKSet.parse(source.read());
        } catch (ParseException e) {
            throw new IOException("the signing keys at " + where + " are not a JSON Web Key Set: " + e.getMessage());
        }
    }

    @Override
    public String toString() {
        return where;
    }
}
