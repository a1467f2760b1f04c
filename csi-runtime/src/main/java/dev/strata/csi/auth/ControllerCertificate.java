package dev.strata.csi.auth;

import dev.strata.csi.log.Log;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.util.List;
import java.util.Optional;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/**
 * What a node agent over TLS takes calls with: a client certificate, chained to the agent CA (the
 * handshake checked that, and that it is for clients), that names controller-server
 * ({@value AgentSecurity#CONTROLLER_NAME}). Only the controller's Secret holds its key, so a token
 * or anything else a node holds or receives cannot call another node's agent. Anything else is
 * UNAUTHENTICATED before a handler runs.
 */
final class ControllerCertificate {

    /** The extended key usage of TLS clients (RFC 5280 id-kp-clientAuth). */
    private static final String CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

    private ControllerCertificate() {}

    /** Why {@code session}'s client is not controller-server; empty when it is. */
    static Optional<String> refusal(SSLSession session) {
        if (session == null) {
            return Optional.of("the call did not come over TLS");
        }
        X509Certificate certificate;
        try {
            if (!(session.getPeerCertificates()[0] instanceof X509Certificate x509)) {
                return Optional.of("the client certificate is not an X.509 certificate");
            }
            certificate = x509;
        } catch (SSLPeerUnverifiedException e) {
            return Optional.of("the call carries no client certificate: node agents take calls from controller-server's only");
        }
        try {
            List<String> usages = certificate.getExtendedKeyUsage();
            if (usages == null || !usages.contains(CLIENT_AUTH)) {
                return Optional.of("the client certificate is not for TLS clients");
            }
            if (!PemFiles.issuedFor(certificate, AgentSecurity.CONTROLLER_NAME)) {
                return Optional.of("the client certificate (" + certificate.getSubjectX500Principal().getName()
                        + ") does not name " + AgentSecurity.CONTROLLER_NAME + ": node agents take calls from controller-server only");
            }
        } catch (CertificateParsingException e) {
            return Optional.of("the client certificate cannot be read: " + e.getMessage());
        }
        return Optional.empty();
    }

    static ServerInterceptor interceptor(Log log) {
        return new ServerInterceptor() {
            @Override
            public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(
                    ServerCall<ReqT, RespT> call, Metadata headers, ServerCallHandler<ReqT, RespT> next) {
                var refused = refusal(call.getAttributes().get(Grpc.TRANSPORT_ATTR_SSL_SESSION));
                if (refused.isPresent()) {
                    log.warn("refused a call on the agent channel", "method", call.getMethodDescriptor().getFullMethodName(),
                            "reason", refused.get(), "peer", call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR));
                    call.close(Status.UNAUTHENTICATED.withDescription(refused.get()), new Metadata());
                    return new ServerCall.Listener<>() {};
                }
                return next.startCall(call, headers);
            }
        };
    }
}
