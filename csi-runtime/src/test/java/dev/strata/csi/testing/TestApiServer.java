package dev.strata.csi.testing;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpsConfigurator;
import com.sun.net.httpserver.HttpsServer;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;

/**
 * A TEST stand-in for the part of kube-apiserver the driver talks to, which cannot run here: the
 * ServiceAccount issuer's key set, GET /openid/v1/jwks, served over HTTPS with a certificate of
 * the cluster CA that kubelet gives every pod as ca.crt. It answers as kube-apiserver does (read
 * in kubernetes/kubernetes pkg/routes/openidmetadata.go, the authentication and authorization
 * filters of k8s.io/apiserver, and emicklei/go-restful's route selection):
 * <ul>
 *   <li>Authentication comes first. A bearer token must be a ServiceAccount token of the
 *   {@link TestIssuer} for the apiserver's audience ({@link #AUDIENCE}), current; any other is
 *   401. A request without one is anonymous, and the default RBAC binding of the route
 *   (system:service-account-issuer-discovery) is for ServiceAccounts only: 403. Both answers are
 *   a Status object as application/json; an Accept header that admits no type a Status can be
 *   written as makes that a 406 Status instead, as the apiserver's negotiation does.</li>
 *   <li>An authenticated GET gets the key set as application/jwk-set+json with the route's
 *   Cache-Control, if the Accept header names application/jwk-set+json or *&#47;* (or there is
 *   none); anything else is 406 with go-restful's plain-text body naming the one type offered.
 *   Another method is 405, another path 404.</li>
 * </ul>
 * Where it differs: /.well-known/openid-configuration and the rest of the API are not served
 * (the driver reads neither), the Status bodies carry no details and no audit headers, and
 * clusters run with --anonymous-auth=false answer 401 where this answers 403.
 */
public final class TestApiServer implements AutoCloseable {

    /** The apiserver's own audience, the one the tokens kubelet mounts into pods are issued for. */
    public static final String AUDIENCE = "https://kubernetes.default.svc.cluster.local";
    public static final String KEYS_PATH = "/openid/v1/jwks";
    public static final String DISCOVERY_PATH = "/.well-known/openid-configuration";
    public static final String JWK_SET = "application/jwk-set+json";

    /** One request as the stand-in saw and answered it. */
    public record Request(String method, String path, String accept, int status) {}

    private final TestIssuer issuer;
    private final HttpsServer server;
    private final Path caFile;
    private final List<Request> requests = new CopyOnWriteArrayList<>();

    private TestApiServer(TestIssuer issuer, HttpsServer server, Path caFile) {
        this.issuer = issuer;
        this.server = server;
        this.caFile = caFile;
    }

    /** Serves {@code issuer}'s keys on 127.0.0.1 (any free port); the CA and the server's credentials go to {@code dir}. */
    public static TestApiServer start(TestIssuer issuer, Path dir) throws IOException, InterruptedException {
        return start(issuer, dir, "127.0.0.1", List.of());
    }

    /**
     * Serves on {@code bindAddress} (0.0.0.0: every interface), with a certificate for the
     * apiserver's in-cluster names, 127.0.0.1 and {@code addresses} (the IPs a client, such as a
     * container, reaches it at).
     */
    public static TestApiServer start(TestIssuer issuer, Path dir, String bindAddress, List<String> addresses)
            throws IOException, InterruptedException {
        Files.createDirectories(dir);
        Path ca = dir.resolve("ca.crt");
        openssl(dir, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=kubernetes",
                "-keyout", "ca.key", "-out", "ca.crt");
        openssl(dir, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kube-apiserver", "-keyout", "apiserver.key",
                "-out", "apiserver.csr");
        List<String> names = new ArrayList<>(List.of("DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc",
                "DNS:kubernetes.default.svc.cluster.local", "IP:127.0.0.1"));
        addresses.forEach(address -> names.add("IP:" + address));
        Files.writeString(dir.resolve("apiserver.ext"),
                "subjectAltName=" + String.join(",", names) + "\nextendedKeyUsage=serverAuth\n");
        openssl(dir, "x509", "-req", "-in", "apiserver.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2",
                "-extfile", "apiserver.ext", "-out", "apiserver.crt");
        HttpsServer server = HttpsServer.create(new InetSocketAddress(bindAddress, 0), 0);
        try {
            server.setHttpsConfigurator(new HttpsConfigurator(tls(dir.resolve("apiserver.key"), dir.resolve("apiserver.crt"))));
        } catch (GeneralSecurityException e) {
            throw new IOException("cannot load the stand-in apiserver's certificate: " + e.getMessage(), e);
        }
        TestApiServer apiServer = new TestApiServer(issuer, server, ca);
        server.createContext("/", apiServer::handle);
        server.start();
        return apiServer;
    }

    public int port() {
        return server.getAddress().getPort();
    }

    /** The key set's URL, as a client on this machine reaches it. */
    public URI keysUri() {
        return keysUri("127.0.0.1");
    }

    /** The key set's URL at {@code host} (one of the certificate's addresses). */
    public URI keysUri(String host) {
        return URI.create("https://" + host + ":" + port() + KEYS_PATH);
    }

    /** What kubelet sets in every container for the apiserver at {@code host}: what {@code --agent-identity-keys=kubernetes} reads. */
    public Map<String, String> serviceEnvironment(String host) {
        return Map.of("KUBERNETES_SERVICE_HOST", host, "KUBERNETES_SERVICE_PORT", Integer.toString(port()));
    }

    /** The cluster CA the server's certificate is issued by. */
    public Path caFile() {
        return caFile;
    }

    /**
     * Writes into {@code into} what kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount
     * of a pod of ServiceAccount {@code namespace/account}: ca.crt, namespace, and a token for the
     * apiserver's audience.
     */
    public Path serviceAccount(Path into, String namespace, String account) throws IOException {
        Files.createDirectories(into);
        Files.copy(caFile, into.resolve("ca.crt"), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        Files.writeString(into.resolve("namespace"), namespace);
        Files.writeString(into.resolve("token"),
                issuer.token(TestIssuer.Claims.of(namespace, account, "node-of-" + account, "pod-of-" + account).audience(AUDIENCE)));
        return into;
    }

    /** The requests answered so far, oldest first. */
    public List<Request> requests() {
        return List.copyOf(requests);
    }

    @Override
    public void close() {
        server.stop(0);
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange) {
            String accept = exchange.getRequestHeaders().getFirst("Accept");
            String path = exchange.getRequestURI().getPath();
            int status = answer(exchange, exchange.getRequestMethod(), path, accept == null ? "" : accept,
                    exchange.getRequestHeaders().getFirst("Authorization"));
            requests.add(new Request(exchange.getRequestMethod(), path, accept, status));
        }
    }

    private int answer(HttpExchange exchange, String method, String path, String accept, String authorization) throws IOException {
        if (authorization == null) {
            return status(exchange, accept, 403, "Forbidden",
                    "forbidden: User \\\"system:anonymous\\\" cannot " + method.toLowerCase() + " path \\\"" + path + "\\\"");
        }
        if (!authorization.startsWith("Bearer ") || !issuer.issued(authorization.substring("Bearer ".length()).strip(), AUDIENCE)) {
            return status(exchange, accept, 401, "Unauthorized", "Unauthorized");
        }
        if (path.equals(DISCOVERY_PATH) && method.equals("GET")) {
            // Served as application/json only, as kube-apiserver's route produces it.
            if (!accepts(accept, "application/json")) {
                return send(exchange, 406, "text/plain; charset=utf-8", "406: Not Acceptable\n\nAvailable representations: application/json");
            }
            return send(exchange, 200, "application/json", "{\"issuer\":\"" + TestIssuer.ISSUER + "\",\"jwks_uri\":\"https://"
                    + exchange.getLocalAddress().getHostString() + ":" + port() + KEYS_PATH + "\",\"response_types_supported\":[\"id_token\"],"
                    + "\"subject_types_supported\":[\"public\"],\"id_token_signing_alg_values_supported\":[\"RS256\"]}");
        }
        if (!path.equals(KEYS_PATH)) {
            exchange.getResponseHeaders().set("X-Content-Type-Options", "nosniff");
            return send(exchange, 404, "text/plain; charset=utf-8", "404 page not found\n");
        }
        if (!method.equals("GET")) {
            exchange.getResponseHeaders().set("Allow", "GET");
            return send(exchange, 405, "text/plain; charset=utf-8", "405: Method Not Allowed");
        }
        if (!accepts(accept, JWK_SET)) {
            // go-restful writes the error without a content type; Go's server then sniffs the body as text.
            return send(exchange, 406, "text/plain; charset=utf-8", "406: Not Acceptable\n\nAvailable representations: " + JWK_SET);
        }
        exchange.getResponseHeaders().set("Cache-Control", "public, max-age=3600");
        return send(exchange, 200, JWK_SET, issuer.keys());
    }

    /** go-restful's test: some type of the header, parameters cut off and spaces trimmed, is {@code type} or all types. */
    static boolean accepts(String accept, String type) {
        if (accept.isEmpty()) {
            return true;
        }
        for (String each : accept.split(",", -1)) {
            int parameters = each.indexOf(';');
            String named = (parameters < 0 ? each : each.substring(0, parameters)).strip();
            if (named.equals("*/*") || named.equals(type)) {
                return true;
            }
        }
        return false;
    }

    /**
     * A Status object as the apiserver writes an error outside the API groups, in the one type the
     * request accepts of those a Status is written as (JSON here); none: a 406 Status.
     */
    private static int status(HttpExchange exchange, String accept, int code, String reason, String message) throws IOException {
        boolean json = accept.isEmpty() || accepts(accept, "application/json") || accepts(accept, "application/*");
        if (!json) {
            code = 406;
            reason = "NotAcceptable";
            message = "only the following media types are accepted: application/json, application/yaml, "
                    + "application/vnd.kubernetes.protobuf";
        }
        return send(exchange, code, "application/json", "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                + "\"message\":\"" + message + "\",\"reason\":\"" + reason + "\",\"details\":{},\"code\":" + code + "}\n");
    }

    private static int send(HttpExchange exchange, int status, String contentType, String body) throws IOException {
        byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", contentType);
        exchange.sendResponseHeaders(status, bytes.length);
        exchange.getResponseBody().write(bytes);
        return status;
    }

    private static void openssl(Path dir, String... args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of("openssl"));
        command.addAll(List.of(args));
        Process process = new ProcessBuilder(command).directory(dir.toFile()).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (process.waitFor() != 0) {
            throw new IOException(String.join(" ", command) + " failed: " + output);
        }
    }

    /** A server TLS context from a PEM private key (PKCS#8, as openssl writes it) and certificate. */
    private static SSLContext tls(Path keyFile, Path certFile) throws IOException, GeneralSecurityException {
        String pem = Files.readString(keyFile).replaceAll("-----[A-Z ]+-----", "").replaceAll("\\s", "");
        var key = KeyFactory.getInstance("RSA").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(pem)));
        Certificate certificate;
        try (var in = Files.newInputStream(certFile)) {
            certificate = CertificateFactory.getInstance("X.509").generateCertificate(in);
        }
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        store.setKeyEntry("apiserver", key, new char[0], new Certificate[] {certificate});
        KeyManagerFactory keys = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        keys.init(store, new char[0]);
        SSLContext context = SSLContext.getInstance("TLS");
        context.init(keys.getKeyManagers(), null, null);
        return context;
    }
}
