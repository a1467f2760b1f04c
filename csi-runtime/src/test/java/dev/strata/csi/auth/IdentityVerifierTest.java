package dev.strata.csi.auth;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import dev.strata.csi.log.Log;
import dev.strata.csi.testing.TestIssuer;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicReference;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Tokens from {@link TestIssuer}, a TEST stand-in for the apiserver, checked as the agent channel checks them. */
class IdentityVerifierTest {

    static final String NODE_ACCOUNT = "system:serviceaccount:strata-csi:strata-node";

    @TempDir
    Path dir;

    final TestIssuer issuer = new TestIssuer("key-1");
    final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    final Log log = new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0);

    /** A clock that moves only when told to. */
    static final class TestClock extends Clock {
        Instant now = Instant.now();

        @Override
        public Instant instant() {
            return now;
        }

        @Override
        public java.time.ZoneId getZone() {
            return ZoneOffset.UTC;
        }

        @Override
        public Clock withZone(java.time.ZoneId zone) {
            return this;
        }
    }

    IdentityVerifier verifier(Path keys, Clock clock) {
        return new IdentityVerifier(SigningKeys.of(keys.toString(), java.util.Map.of(), clock), "strata.csi.dev", Set.of(NODE_ACCOUNT),
                clock, log);
    }

    @Test
    void aProjectedTokenOfAnAcceptedServiceAccountNamesItsNodeAndPod() throws Exception {
        Path keys = issuer.writeKeys(dir.resolve("jwks.json"));
        Caller caller = verifier(keys, Clock.systemUTC()).verify(issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1")));
        assertEquals(NODE_ACCOUNT, caller.subject());
        assertEquals(Optional.of("node-a"), caller.nodeName());
        assertEquals(Optional.of("pod-1"), caller.podUid());

        Caller old = verifier(keys, Clock.systemUTC()).verify(issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1")
                .withoutNode()));
        assertEquals(Optional.empty(), old.nodeName(), "clusters before 1.30 issue no node claim");
    }

    @Test
    void tokensThatDoNotIdentifyAnAcceptedCallerAreRefused() throws Exception {
        Path keys = issuer.writeKeys(dir.resolve("jwks.json"));
        IdentityVerifier verifier = verifier(keys, Clock.systemUTC());
        var node = TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1");
        String valid = issuer.token(node);
        String[] parts = valid.split("\\.");
        String payload = new String(Base64.getUrlDecoder().decode(parts[1]), StandardCharsets.UTF_8);
        String unsigned = Base64.getUrlEncoder().withoutPadding().encodeToString("{\"alg\":\"none\"}".getBytes(StandardCharsets.UTF_8))
                + "." + parts[1] + ".";
        String otherNode = Base64.getUrlEncoder().withoutPadding().encodeToString(
                payload.replace("node-a", "node-b").getBytes(StandardCharsets.UTF_8));
        var refused = new java.util.LinkedHashMap<String, String>();
        refused.put("expired", issuer.token(node.issued(Instant.now().minus(Duration.ofHours(2)))));
        refused.put("not valid yet", issuer.token(node.issued(Instant.now().plus(Duration.ofMinutes(10)))));
        refused.put("another audience", issuer.token(node.audience("https://kubernetes.default.svc")));
        refused.put("another ServiceAccount", issuer.token(TestIssuer.Claims.of("default", "default", "node-a", "pod-2")));
        refused.put("another issuer's key under the same key id", new TestIssuer("key-1").token(node));
        refused.put("alg none", unsigned);
        refused.put("claims changed after signing", parts[0] + "." + otherNode + "." + parts[2]);
        refused.put("not a JWT", "garbage");
        for (var entry : refused.entrySet()) {
            var e = assertThrows(IdentityVerifier.Refused.class, () -> verifier.verify(entry.getValue()), entry.getKey());
            assertFalse(e.getMessage().contains(entry.getValue()), "the token never appears in the message");
        }
        assertFalse(logged.toString(StandardCharsets.UTF_8).contains(valid.substring(0, 40)), "no token in the log");
    }

    @Test
    void rotatedKeysAreReadWhenATokenNamesAnUnknownKeyAtMostEveryThirtySeconds() throws Exception {
        Path keys = issuer.writeKeys(dir.resolve("jwks.json"));
        TestClock clock = new TestClock();
        IdentityVerifier verifier = verifier(keys, clock);
        var node = TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1");
        verifier.verify(issuer.token(node));
        TestIssuer rotated = new TestIssuer("key-2");
        rotated.writeKeys(keys);
        assertThrows(IdentityVerifier.Refused.class, () -> verifier.verify(rotated.token(node)), "not read again within 30 s");
        clock.now = clock.now.plus(SigningKeys.REFETCH);
        assertEquals(Optional.of("node-a"), verifier.verify(rotated.token(node)).nodeName());
    }

    /** The keys read over https as from the apiserver: its CA trusted, the pod's ServiceAccount token as the bearer. */
    @Test
    void keysAreReadOverHttpsWithTheServiceAccountsCaAndToken() throws Exception {
        Path account = Files.createDirectories(dir.resolve("serviceaccount"));
        Process openssl = new ProcessBuilder("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", dir.resolve("key.pem").toString(), "-out", account.resolve("ca.crt").toString())
                .redirectErrorStream(true).start();
        assertEquals(0, openssl.waitFor(), new String(openssl.getInputStream().readAllBytes(), StandardCharsets.UTF_8));
        Files.writeString(account.resolve("token"), "pod-service-account-token\n");

        AtomicReference<String> bearer = new AtomicReference<>();
        HttpsServer server = HttpsServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        server.setHttpsConfigurator(new HttpsConfigurator(serverTls(dir.resolve("key.pem"), account.resolve("ca.crt"))));
        server.createContext("/openid/v1/jwks", exchange -> {
            bearer.set(exchange.getRequestHeaders().getFirst("Authorization"));
            byte[] body = issuer.keys().getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            exchange.getResponseBody().write(body);
            exchange.close();
        });
        server.start();
        try {
            URI uri = URI.create("https://127.0.0.1:" + server.getAddress().getPort() + "/openid/v1/jwks");
            IdentityVerifier verifier = new IdentityVerifier(SigningKeys.fromUrl(uri, account, Clock.systemUTC()), "strata.csi.dev",
                    Set.of(NODE_ACCOUNT), Clock.systemUTC(), log);
            Caller caller = verifier.verify(issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1")));
            assertEquals(Optional.of("node-a"), caller.nodeName());
            assertEquals("Bearer pod-service-account-token", bearer.get());
        } finally {
            server.stop(0);
        }
    }

    @Test
    void keysAreNeverReadOverPlainHttp() {
        var e = assertThrows(IllegalArgumentException.class,
                () -> SigningKeys.of("http://10.0.0.1/openid/v1/jwks", java.util.Map.of(), Clock.systemUTC()));
        assertTrue(e.getMessage().contains("https only"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> SigningKeys.of("kubernetes", java.util.Map.of(), Clock.systemUTC()),
                "outside a pod there is no apiserver to ask");
    }

    private static SSLContext serverTls(Path keyFile, Path certFile) throws Exception {
        String pem = Files.readString(keyFile).replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
        var key = KeyFactory.getInstance("RSA").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(pem)));
        Certificate certificate;
        try (var in = Files.newInputStream(certFile)) {
            certificate = CertificateFactory.getInstance("X.509").generateCertificate(in);
        }
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        store.setKeyEntry("server", key, new char[0], new Certificate[] {certificate});
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, new char[0]);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(keys.getKeyManagers(), null, null);
        return context;
    }
}
