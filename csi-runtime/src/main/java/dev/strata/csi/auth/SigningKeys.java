package dev.strata.csi.auth;

import com.nimbusds.jose.jwk.JWK;
import com.nimbusds.jose.jwk.JWKSet;
import com.nimbusds.jose.util.JSONObjectUtils;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
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
 * apiserver publishes it at /openid/v1/jwks). Read at start ({@link #read()}), at the first token
 * and again when a token names a key not seen yet (the apiserver's keys were rotated), at most
 * every {@link #REFETCH}. While the last reading failed, that failure is what {@link #key} reports:
 * a key set that could not be read says nothing about a token's key. Read from the apiserver (or
 * an https URL), they come with the issuer its /.well-known/openid-configuration names
 * ({@link #issuer()}), which tokens must carry.
 */
public final class SigningKeys {

    /** Where a pod finds its own ServiceAccount's CA and token, to read the keys from the apiserver. */
    public static final Path SERVICE_ACCOUNT_DIR = Path.of("/var/run/secrets/kubernetes.io/serviceaccount");
    static final Duration REFETCH = Duration.ofSeconds(30);
    /**
     * kube-apiserver serves /openid/v1/jwks as application/jwk-set+json only: its route produces
     * that one type, and go-restful answers 406 to an Accept header that names neither it nor the
     * all-types wildcard (types are compared exactly). Other issuers serve the key set as JSON.
     */
    static final String ACCEPT = "application/jwk-set+json, application/json;q=0.9";
    /** Where an OpenID provider (kube-apiserver is one for its ServiceAccount tokens) says who it is. */
    static final String DISCOVERY_PATH = "/.well-known/openid-configuration";

    /** Reads the key set's JSON. */
    @FunctionalInterface
    interface Source {
        String read() throws IOException;
    }

    private final String where;
    private final Source source;
    /** The discovery document's source; null for a JWKS file, whose issuer the operator names. */
    private final Source discovery;
    private final Clock clock;
    private String issuer;
    /** Why the last reading of the issuer failed, and when it was; null after none or a good one. */
    private String issuerFailure;
    private Instant issuerReadAt = Instant.MIN;
    private JWKSet keys;
    private Instant readAt = Instant.MIN;
    /** Why the last reading failed; null after a good one. */
    private String failure;

    SigningKeys(String where, Source source, Source discovery, Clock clock) {
        this.where = where;
        this.source = source;
        this.discovery = discovery;
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
        return new SigningKeys(file.toString(), () -> Files.readString(file), null, clock);
    }

    /** Keys read from {@code uri} with the CA and bearer token in {@code serviceAccountDir} (ca.crt, token). */
    static SigningKeys fromUrl(URI uri, Path serviceAccountDir, Clock clock) {
        return fromUrl(uri, serviceAccountDir, ACCEPT, clock);
    }

    /** As {@link #fromUrl(URI, Path, Clock)}, asking for the media types {@code accept} (tests: the Accept header before issue 25). */
    static SigningKeys fromUrl(URI uri, Path serviceAccountDir, String accept, Clock clock) {
        return new SigningKeys(uri.toString(), https(uri, serviceAccountDir, accept),
                https(uri.resolve(DISCOVERY_PATH), serviceAccountDir, "application/json"), clock);
    }

    /** What {@code uri} answers, read with the CA and bearer token in {@code serviceAccountDir}. */
    private static Source https(URI uri, Path serviceAccountDir, String accept) {
        return () -> {
            HttpClient client = HttpClient.newBuilder()
                    .sslContext(trusting(serviceAccountDir.resolve("ca.crt")))
                    .connectTimeout(Duration.ofSeconds(10))
                    .build();
            String bearer = Files.readString(serviceAccountDir.resolve("token")).strip();
            HttpRequest request = HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(10))
                    .header("Authorization", "Bearer " + bearer).header("Accept", accept).GET().build();
            try {
                HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
                if (response.statusCode() != 200) {
                    throw new IOException(refusal(response.statusCode(), response.body(), serviceAccountDir, accept));
                }
                return response.body();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted");
            } finally {
                client.close();
            }
        };
    }

    /** Whether the issuer comes with the keys ({@link #issuer()}); not for a JWKS file. */
    public boolean discoversIssuer() {
        return discovery != null;
    }

    /**
     * The issuer the apiserver's discovery document names, read once (an issuer does not change
     * while a server runs: kube-apiserver takes it from its command line); the IOException says why
     * it cannot be read now. After a failed reading it is asked again at most every {@link #REFETCH}.
     */
    synchronized String issuer() throws IOException {
        if (issuer != null) {
            return issuer;
        }
        if (discovery == null) {
            throw new IOException("no issuer is known for the keys in " + where);
        }
        if (issuerFailure != null && clock.instant().isBefore(issuerReadAt.plus(REFETCH))) {
            throw new IOException(issuerFailure);
        }
        issuerReadAt = clock.instant();
        // Only keys read over https have a discovery document: where is their URL.
        String cannot = "cannot read the cluster's token issuer from " + URI.create(where).resolve(DISCOVERY_PATH) + ": ";
        try {
            Object read = JSONObjectUtils.parse(discovery.read()).get("issuer");
            if (!(read instanceof String named) || named.isEmpty()) {
                throw new IOException("the discovery document names no issuer");
            }
            issuer = named;
            issuerFailure = null;
            return issuer;
        } catch (ParseException e) {
            issuerFailure = cannot + "not JSON: " + e.getMessage();
        } catch (IOException e) {
            issuerFailure = cannot + e.getMessage();
        }
        throw new IOException(issuerFailure);
    }

    /** What an answer other than 200 says, in one line: the status, what the server said, and what to look at. */
    static String refusal(int status, String body, Path serviceAccountDir, String accept) {
        String reason = switch (status) {
            case 401 -> " Unauthorized (the apiserver did not accept the token in " + serviceAccountDir.resolve("token") + ")";
            case 403 -> " Forbidden (the ServiceAccount needs the system:service-account-issuer-discovery role, or ours: strata-token-keys)";
            case 404 -> " Not Found";
            case 406 -> " Not Acceptable (the server offers none of the media types asked for: " + accept + ")";
            default -> "";
        };
        String said = body == null ? "" : body.replaceAll("\\s+", " ").strip();
        return "HTTP " + status + reason + (said.isEmpty() ? "" : ": " + (said.length() > 200 ? said.substring(0, 200) + "..." : said));
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

    /**
     * The key with id {@code keyId} (or the only key, for a token that names none); read again once
     * if not known. Empty only when the key set was read and lacks it; an IOException (its message
     * "cannot read the cluster's signing keys from ...") when the key set cannot be read now.
     */
    synchronized Optional<JWK> key(String keyId) throws IOException {
        Optional<JWK> known = find(keyId);
        if (known.isPresent()) {
            return known;
        }
        if (!clock.instant().isBefore(readAt.plus(REFETCH))) {
            read();
            return find(keyId);
        }
        if (failure != null) {
            throw new IOException(failure);
        }
        return known;
    }

    /** The number of keys the cluster publishes, read now; the IOException says why they cannot be read. */
    public synchronized int read() throws IOException {
        readAt = clock.instant();
        try {
            keys = JWKSet.parse(source.read());
            failure = null;
            return keys.getKeys().size();
        } catch (ParseException e) {
            failure = cannotRead("not a JSON Web Key Set: " + e.getMessage());
        } catch (NoSuchFileException e) {
            failure = cannotRead("no such file");
        } catch (ConnectException e) {
            failure = cannotRead("cannot connect" + (e.getMessage() == null ? "" : ": " + e.getMessage()));
        } catch (IOException e) {
            failure = cannotRead(e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName());
        }
        throw new IOException(failure);
    }

    private String cannotRead(String why) {
        return "cannot read the cluster's signing keys from " + where + ": " + why;
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

    @Override
    public String toString() {
        return where;
    }
}
