package dev.strata.csi.auth;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.log.Log;
import dev.strata.csi.testing.TestApiServer;
import dev.strata.csi.testing.TestIssuer;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Base64;
import java.util.List;
import java.util.Optional;
import java.util.Set;
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
        return new IdentityVerifier(SigningKeys.of(keys.toString(), java.util.Map.of(), clock), Optional.of(TestIssuer.ISSUER),
                "strata.csi.dev", Set.of(NODE_ACCOUNT),
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
        refused.put("another issuer (the --agent-identity-issuer given)", issuer.token(node.issuer("https://other-cluster.invalid")));
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
        try (TestApiServer apiServer = TestApiServer.start(issuer, dir.resolve("apiserver"))) {
            Path account = apiServer.serviceAccount(dir.resolve("serviceaccount"), "strata-csi", "strata-controller");
            IdentityVerifier verifier = new IdentityVerifier(SigningKeys.fromUrl(apiServer.keysUri(), account, Clock.systemUTC()), Optional.empty(),
                    "strata.csi.dev", Set.of(NODE_ACCOUNT), Clock.systemUTC(), log);
            Caller caller = verifier.verify(issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1")));
            assertEquals(Optional.of("node-a"), caller.nodeName());
            assertEquals(List.of(new TestApiServer.Request("GET", TestApiServer.KEYS_PATH, SigningKeys.ACCEPT, 200),
                    new TestApiServer.Request("GET", TestApiServer.DISCOVERY_PATH, "application/json", 200)), apiServer.requests(),
                    "the keys, then the issuer, once");
            verifier.verify(issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-2")));
            assertEquals(2, apiServer.requests().size(), "neither read again for a known key: " + apiServer.requests());

            var otherCluster = assertThrows(IdentityVerifier.Refused.class, () -> verifier.verify(issuer.token(
                    TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1").issuer("https://other-cluster.invalid"))));
            assertEquals("the identity token is issued by https://other-cluster.invalid, not by the cluster's issuer "
                    + TestIssuer.ISSUER, otherCluster.getMessage(), "the issuer the apiserver's discovery document names");

            // Keys read, then the apiserver refuses the pod's token: the issuer cannot be read, every token is
            // refused saying so, and the issuer is asked again at most every 30 s.
            TestClock clock = new TestClock();
            SigningKeys keys = SigningKeys.fromUrl(apiServer.keysUri(), account, clock);
            keys.read();
            Files.writeString(account.resolve("token"), "not-a-token");
            IdentityVerifier unknown = new IdentityVerifier(keys, Optional.empty(), "strata.csi.dev", Set.of(NODE_ACCOUNT), clock, log);
            String token = issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1"));
            int before = apiServer.requests().size();
            for (int call = 0; call < 3; call++) {
                var refused = assertThrows(IdentityVerifier.Refused.class, () -> unknown.verify(token));
                assertTrue(refused.getMessage().startsWith("cannot read the cluster's token issuer from https://")
                        && refused.getMessage().contains(SigningKeys.DISCOVERY_PATH + ": HTTP 401"), refused.getMessage());
            }
            assertEquals(1, apiServer.requests().size() - before, "asked once within 30 s: " + apiServer.requests());
            clock.now = clock.now.plus(SigningKeys.REFETCH);
            assertThrows(IdentityVerifier.Refused.class, () -> unknown.verify(token));
            assertEquals(2, apiServer.requests().size() - before, "and again after 30 s: " + apiServer.requests());
        }
    }

    /** The stand-in itself, asked as curl would: it must refuse what kube-apiserver refuses, or no test could see a wrong request. */
    @Test
    void theStandInAnswersAsKubeApiserverDoes() throws Exception {
        try (TestApiServer apiServer = TestApiServer.start(issuer, dir.resolve("apiserver"))) {
            Path account = apiServer.serviceAccount(dir.resolve("serviceaccount"), "strata-csi", "strata-controller");
            String bearer = "Bearer " + Files.readString(account.resolve("token"));
            SSLContext tls = SSLContext.getInstance("TLS");
            tls.init(null, PemFiles.trustManagers(account.resolve("ca.crt")), null);
            try (HttpClient client = HttpClient.newBuilder().sslContext(tls).build()) {
                record Answer(int status, String contentType, String body) {}
                java.util.function.BiFunction<String, String, Answer> get = (accept, authorization) -> {
                    HttpRequest.Builder request = HttpRequest.newBuilder(apiServer.keysUri());
                    if (accept != null) {
                        request.header("Accept", accept);
                    }
                    if (authorization != null) {
                        request.header("Authorization", authorization);
                    }
                    try {
                        HttpResponse<String> response = client.send(request.build(), HttpResponse.BodyHandlers.ofString());
                        return new Answer(response.statusCode(), response.headers().firstValue("Content-Type").orElse(""), response.body());
                    } catch (Exception e) {
                        throw new AssertionError(e);
                    }
                };
                for (String accept : new String[] {null, "*/*", "application/jwk-set+json", SigningKeys.ACCEPT, "text/html, */*;q=0.1"}) {
                    Answer answer = get.apply(accept, bearer);
                    assertEquals(200, answer.status(), "Accept: " + accept);
                    assertEquals("application/jwk-set+json", answer.contentType());
                    assertEquals(issuer.keys(), answer.body());
                }
                for (String accept : new String[] {"application/json", "application/*", "application/jwk-set", "text/plain"}) {
                    Answer answer = get.apply(accept, bearer);
                    assertEquals(406, answer.status(), "Accept: " + accept);
                    assertEquals("text/plain; charset=utf-8", answer.contentType());
                    assertEquals("406: Not Acceptable\n\nAvailable representations: application/jwk-set+json", answer.body());
                }
                Answer anonymous = get.apply(SigningKeys.ACCEPT, null);
                assertEquals(403, anonymous.status());
                assertTrue(anonymous.body().contains("\"reason\":\"Forbidden\""), anonymous.body());
                Answer notForTheApiserver = get.apply(SigningKeys.ACCEPT,
                        "Bearer " + issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1")));
                assertEquals(401, notForTheApiserver.status(), "a token for another audience is not the apiserver's");
                assertEquals("application/json", notForTheApiserver.contentType());
                assertEquals(401, get.apply(SigningKeys.ACCEPT, "Bearer " + new TestIssuer("key-1").token(
                        TestIssuer.Claims.of("strata-csi", "strata-controller", "n", "p").audience(TestApiServer.AUDIENCE))).status(),
                        "another issuer's token");
                assertEquals(406, get.apply("application/jwk-set+json", "Bearer x").status(),
                        "the 401 Status cannot be written as the only type asked for");
            }
        }
    }

    /**
     * Issue 25's defect: the keys asked for with the Accept the driver used to send, which
     * kube-apiserver answers with 406. The refusal must say that the keys could not be read, at
     * start and on every call, and never that the token's key is not published.
     */
    @Test
    void aKeySetThatCannotBeReadIsReportedAsSuchNeverAsAWrongKey() throws Exception {
        try (TestApiServer apiServer = TestApiServer.start(issuer, dir.resolve("apiserver"))) {
            Path account = apiServer.serviceAccount(dir.resolve("serviceaccount"), "strata-csi", "strata-controller");
            TestClock clock = new TestClock();
            IdentityVerifier verifier = new IdentityVerifier(SigningKeys.fromUrl(apiServer.keysUri(), account, "application/json", clock), Optional.empty(),
                    "strata.csi.dev", Set.of(NODE_ACCOUNT), clock, log);
            String expected = "cannot read the cluster's signing keys from " + apiServer.keysUri() + ": HTTP 406 Not Acceptable";
            verifier.readKeys();
            assertTrue(logged.toString(StandardCharsets.UTF_8).contains(expected), "said at start: " + logged);

            String token = issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1"));
            for (int call = 0; call < 3; call++) { // within the 30 s the keys are not asked again, then after each 30 s
                if (call > 0) {
                    clock.now = clock.now.plus(SigningKeys.REFETCH);
                }
                var refused = assertThrows(IdentityVerifier.Refused.class, () -> verifier.verify(token));
                assertTrue(refused.getMessage().startsWith(expected), refused.getMessage());
                assertFalse(refused.getMessage().contains("not among the keys"), refused.getMessage());
            }
            assertEquals(3, apiServer.requests().size(), "asked at start and after each 30 s: " + apiServer.requests());
            assertTrue(apiServer.requests().stream().allMatch(request -> request.status() == 406));

            // The same server asked as kube-apiserver serves the keys: the token is accepted, and one of an unknown key is a wrong key.
            IdentityVerifier fixed = new IdentityVerifier(SigningKeys.fromUrl(apiServer.keysUri(), account, clock), Optional.empty(),
                    "strata.csi.dev",
                    Set.of(NODE_ACCOUNT), clock, log);
            assertEquals(Optional.of("node-a"), fixed.verify(token).nodeName());
            var wrongKey = assertThrows(IdentityVerifier.Refused.class, () -> fixed.verify(new TestIssuer("key-9").token(
                    TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1"))));
            assertTrue(wrongKey.getMessage().contains("key-9, which is not among the keys the cluster publishes"), wrongKey.getMessage());
        }
    }

    @Test
    void aRefusedServiceAccountTokenIsReportedAsSuch() throws Exception {
        try (TestApiServer apiServer = TestApiServer.start(issuer, dir.resolve("apiserver"))) {
            Path account = apiServer.serviceAccount(dir.resolve("serviceaccount"), "strata-csi", "strata-controller");
            Files.writeString(account.resolve("token"), issuer.token(TestIssuer.Claims.of("strata-csi", "strata-controller", "n", "p")));
            IdentityVerifier verifier = new IdentityVerifier(SigningKeys.fromUrl(apiServer.keysUri(), account, Clock.systemUTC()), Optional.empty(),
                    "strata.csi.dev", Set.of(NODE_ACCOUNT), Clock.systemUTC(), log);
            var refused = assertThrows(IdentityVerifier.Refused.class,
                    () -> verifier.verify(issuer.token(TestIssuer.Claims.of("strata-csi", "strata-node", "node-a", "pod-1"))));
            assertTrue(refused.getMessage().startsWith("cannot read the cluster's signing keys from " + apiServer.keysUri()
                    + ": HTTP 401 Unauthorized (the apiserver did not accept the token in " + account.resolve("token") + ")"),
                    refused.getMessage());
            assertFalse(refused.getMessage().contains(Files.readString(account.resolve("token"))), "no token in the message");
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
}
