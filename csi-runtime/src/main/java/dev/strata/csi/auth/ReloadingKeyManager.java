package dev.strata.csi.auth;

import dev.strata.csi.log.Log;
import java.net.Socket;
import java.nio.file.Path;
import java.security.Principal;
import java.security.PrivateKey;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.X509ExtendedKeyManager;

/**
 * A server's pair on the agent channel (controller-server's is also its client certificate), read
 * again from their files when these are replaced (a renewed Secret), so that the next TLS handshake
 * presents the new certificate without a restart; connections already open keep theirs. Checked at each handshake, which on the agent
 * channel are few (channels are long-lived). A pair that cannot be read, or whose key does not
 * match the certificate (files caught mid-replacement), is logged and the previous pair stays.
 * Each pair gets an alias of its own, so one handshake never mixes an old certificate with a new key.
 * A certificate that does not name the side's own name (a node's pair given to the controller, or
 * the other way) is refused at start and, when replaced, is not served.
 */
final class ReloadingKeyManager extends X509ExtendedKeyManager {

    private record Pair(String alias, X509Certificate[] chain, PrivateKey key, PemFiles.Stamp certStamp, PemFiles.Stamp keyStamp) {}

    private final Path certFile;
    private final Path keyFile;
    private final String name;
    private final Log log;
    private final Map<String, Pair> byAlias = new ConcurrentHashMap<>();
    private volatile Pair current;
    private int generation;

    /** Reads the pair once; a failure here is the caller's (a bad command line). */
    ReloadingKeyManager(Path certFile, Path keyFile, String name, Log log) throws Exception {
        this.certFile = certFile;
        this.keyFile = keyFile;
        this.name = name;
        this.log = log;
        this.current = load();
        byAlias.put(current.alias(), current);
    }

    private Pair load() throws Exception {
        PemFiles.Stamp certStamp = PemFiles.Stamp.of(certFile);
        PemFiles.Stamp keyStamp = PemFiles.Stamp.of(keyFile);
        List<X509Certificate> chain = PemFiles.certificates(certFile);
        PrivateKey key = PemFiles.privateKey(keyFile);
        PemFiles.requireMatch(chain.getFirst(), key);
        PemFiles.requireName(chain.getFirst(), name, certFile);
        return new Pair("agent-" + (++generation), chain.toArray(X509Certificate[]::new), key, certStamp, keyStamp);
    }

    /** The pair to serve now: read again first if either file was replaced since. */
    private synchronized Pair refresh() {
        Pair pair = current;
        if (pair.certStamp().equals(PemFiles.Stamp.of(certFile)) && pair.keyStamp().equals(PemFiles.Stamp.of(keyFile))) {
            return pair;
        }
        try {
            Pair next = load();
            byAlias.clear(); // a handshake in progress on the old alias finds it again below
            byAlias.put(pair.alias(), pair);
            byAlias.put(next.alias(), next);
            current = next;
            log.info("agent TLS certificate reloaded", "certificate", certFile, "subject",
                    next.chain()[0].getSubjectX500Principal().getName(), "not_after", next.chain()[0].getNotAfter().toInstant());
            return next;
        } catch (Exception e) {
            log.warn("agent TLS certificate files changed but cannot be used; serving the previous ones",
                    "certificate", certFile, "key", keyFile, "error", e.getMessage());
            // Do not read again until they change once more.
            current = new Pair(pair.alias(), pair.chain(), pair.key(), PemFiles.Stamp.of(certFile), PemFiles.Stamp.of(keyFile));
            byAlias.put(pair.alias(), current);
            return current;
        }
    }

    private String aliasFor(String keyType) {
        Pair pair = refresh();
        String algorithm = pair.key().getAlgorithm();
        boolean fits = keyType == null || keyType.startsWith(algorithm) || (algorithm.equals("RSA") && keyType.equals("RSASSA-PSS"));
        return fits ? pair.alias() : null;
    }

    @Override
    public String chooseEngineServerAlias(String keyType, Principal[] issuers, SSLEngine engine) {
        return aliasFor(keyType);
    }

    @Override
    public String chooseServerAlias(String keyType, Principal[] issuers, Socket socket) {
        return aliasFor(keyType);
    }

    @Override
    public String[] getServerAliases(String keyType, Principal[] issuers) {
        String alias = aliasFor(keyType);
        return alias == null ? null : new String[] {alias};
    }

    @Override
    public X509Certificate[] getCertificateChain(String alias) {
        Pair pair = byAlias.get(alias);
        return pair == null ? null : pair.chain().clone();
    }

    @Override
    public PrivateKey getPrivateKey(String alias) {
        Pair pair = byAlias.get(alias);
        return pair == null ? null : pair.key();
    }

    // Only controller-server's client context is given this manager: its pair is its client certificate.
    @Override
    public String[] getClientAliases(String keyType, Principal[] issuers) {
        return getServerAliases(keyType, issuers);
    }

    @Override
    public String chooseClientAlias(String[] keyTypes, Principal[] issuers, Socket socket) {
        return clientAlias(keyTypes);
    }

    @Override
    public String chooseEngineClientAlias(String[] keyTypes, Principal[] issuers, SSLEngine engine) {
        return clientAlias(keyTypes);
    }

    private String clientAlias(String[] keyTypes) {
        for (String keyType : keyTypes) {
            String alias = aliasFor(keyType);
            if (alias != null) {
                return alias;
            }
        }
        return null;
    }
}
