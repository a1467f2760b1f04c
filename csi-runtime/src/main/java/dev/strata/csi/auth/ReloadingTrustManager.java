package dev.strata.csi.auth;

import dev.strata.csi.log.Log;
import java.net.Socket;
import java.nio.file.Path;
import java.security.cert.CertificateException;
import java.security.cert.X509Certificate;
import javax.net.ssl.SSLEngine;
import javax.net.ssl.TrustManager;
import javax.net.ssl.X509ExtendedTrustManager;

/**
 * The CA (or CAs: the file may hold several during a rotation) the agent channel's clients check
 * the server's certificate against, read again when the file is replaced, at the next handshake.
 * The JDK's own trust manager does the checking, host name included; an unreadable file is
 * logged and the previous CAs stay.
 */
final class ReloadingTrustManager extends X509ExtendedTrustManager {

    private record Loaded(X509ExtendedTrustManager manager, PemFiles.Stamp stamp) {}

    private final Path caFile;
    private final Log log;
    private volatile Loaded current;

    ReloadingTrustManager(Path caFile, Log log) throws Exception {
        this.caFile = caFile;
        this.log = log;
        this.current = load();
    }

    private Loaded load() throws Exception {
        PemFiles.Stamp stamp = PemFiles.Stamp.of(caFile);
        for (TrustManager manager : PemFiles.trustManagers(caFile)) {
            if (manager instanceof X509ExtendedTrustManager extended) {
                return new Loaded(extended, stamp);
            }
        }
        throw new IllegalStateException("the JDK offers no X509ExtendedTrustManager");
    }

    private synchronized X509ExtendedTrustManager manager() {
        Loaded loaded = current;
        PemFiles.Stamp now = PemFiles.Stamp.of(caFile);
        if (loaded.stamp().equals(now)) {
            return loaded.manager();
        }
        try {
            current = load();
            log.info("agent TLS CA reloaded", "ca", caFile);
        } catch (Exception e) {
            log.warn("agent TLS CA file changed but cannot be used; trusting the previous CAs", "ca", caFile, "error", e.getMessage());
            current = new Loaded(loaded.manager(), now);
        }
        return current.manager();
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, SSLEngine engine) throws CertificateException {
        manager().checkServerTrusted(chain, authType, engine);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType, Socket socket) throws CertificateException {
        manager().checkServerTrusted(chain, authType, socket);
    }

    @Override
    public void checkServerTrusted(X509Certificate[] chain, String authType) throws CertificateException {
        manager().checkServerTrusted(chain, authType);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, SSLEngine engine) throws CertificateException {
        manager().checkClientTrusted(chain, authType, engine);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType, Socket socket) throws CertificateException {
        manager().checkClientTrusted(chain, authType, socket);
    }

    @Override
    public void checkClientTrusted(X509Certificate[] chain, String authType) throws CertificateException {
        manager().checkClientTrusted(chain, authType);
    }

    @Override
    public X509Certificate[] getAcceptedIssuers() {
        return manager().getAcceptedIssuers();
    }
}
