package dev.strata.csi.auth;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.Signature;
import java.security.cert.CertificateFactory;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Objects;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;

/** PEM certificates and PKCS#8 keys read from files, and what tells that a file was replaced. */
final class PemFiles {

    /** The subjectAltName type of DNS names (RFC 5280). */
    private static final int DNS_NAME = 2;

    private PemFiles() {}

    /**
     * What changes when a file is replaced: the modification time and the file's identity (device
     * and inode), read through symbolic links. A Secret volume swaps its ..data link to a new
     * directory of new files, so both change.
     */
    record Stamp(Object fileKey, long modifiedMillis, long size) {
        static Stamp of(Path file) {
            try {
                BasicFileAttributes attributes = Files.readAttributes(file, BasicFileAttributes.class);
                return new Stamp(attributes.fileKey(), attributes.lastModifiedTime().toMillis(), attributes.size());
            } catch (IOException e) {
                return new Stamp(null, -1, -1); // gone for now: a change too, and the reload reports it
            }
        }
    }

    static List<X509Certificate> certificates(Path file) throws IOException, GeneralSecurityException {
        List<X509Certificate> certificates = new ArrayList<>();
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        for (var certificate : factory.generateCertificates(new ByteArrayInputStream(Files.readAllBytes(file)))) {
            certificates.add((X509Certificate) certificate);
        }
        if (certificates.isEmpty()) {
            throw new GeneralSecurityException(file + " holds no certificate");
        }
        return certificates;
    }

    /** The JDK's trust managers for the CAs in {@code file}: they do the checking, host name included. */
    static TrustManager[] trustManagers(Path file) throws IOException, GeneralSecurityException {
        List<X509Certificate> cas = certificates(file);
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        for (int i = 0; i < cas.size(); i++) {
            store.setCertificateEntry("ca-" + i, cas.get(i));
        }
        TrustManagerFactory factory = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        factory.init(store);
        return factory.getTrustManagers();
    }

    /** A PKCS#8 private key ({@code BEGIN PRIVATE KEY}, what openssl 3 writes), RSA or EC. */
    static PrivateKey privateKey(Path file) throws IOException, GeneralSecurityException {
        String pem = Files.readString(file, StandardCharsets.US_ASCII);
        int begin = pem.indexOf("-----BEGIN PRIVATE KEY-----");
        int end = pem.indexOf("-----END PRIVATE KEY-----");
        if (begin < 0 || end < begin) {
            throw new GeneralSecurityException(file + " holds no PKCS#8 private key (BEGIN PRIVATE KEY)");
        }
        byte[] der = Base64.getMimeDecoder().decode(pem.substring(begin + "-----BEGIN PRIVATE KEY-----".length(), end));
        GeneralSecurityException last = null;
        for (String algorithm : List.of("RSA", "EC")) {
            try {
                return KeyFactory.getInstance(algorithm).generatePrivate(new PKCS8EncodedKeySpec(der));
            } catch (GeneralSecurityException e) {
                last = e;
            }
        }
        throw new GeneralSecurityException(file + ": not an RSA or EC key", last);
    }

    /** Whether {@code certificate} is issued for the DNS name {@code name} (a subjectAltName). */
    static boolean issuedFor(X509Certificate certificate, String name) throws CertificateParsingException {
        var names = certificate.getSubjectAlternativeNames();
        return names != null && names.stream().anyMatch(entry -> Integer.valueOf(DNS_NAME).equals(entry.get(0)) && name.equals(entry.get(1)));
    }

    /** Fails unless {@code certificate} is issued for {@code name}: each side serves its own pair. */
    static void requireName(X509Certificate certificate, String name, Path file) throws GeneralSecurityException {
        if (!issuedFor(certificate, name)) {
            throw new GeneralSecurityException(file + " is not issued for the name " + name + " (subject "
                    + certificate.getSubjectX500Principal().getName() + "): is it the other side's certificate?");
        }
    }

    /** Fails unless {@code key} belongs to {@code certificate}: files caught mid-replacement must not be served. */
    static void requireMatch(X509Certificate certificate, PrivateKey key) throws GeneralSecurityException {
        String algorithm = Objects.equals(key.getAlgorithm(), "EC") ? "SHA256withECDSA" : "SHA256withRSA";
        byte[] probe = "strata-agent key check".getBytes(StandardCharsets.US_ASCII);
        Signature signer = Signature.getInstance(algorithm);
        signer.initSign(key);
        signer.update(probe);
        byte[] signature = signer.sign();
        Signature verifier = Signature.getInstance(algorithm);
        verifier.initVerify(certificate.getPublicKey());
        verifier.update(probe);
        if (!verifier.verify(signature)) {
            throw new GeneralSecurityException("the private key does not belong to the certificate");
        }
    }
}
