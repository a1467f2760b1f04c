package dev.strata.csi.log;

import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import com.google.protobuf.TextFormat;
import io.grpc.ForwardingServerCall.SimpleForwardingServerCall;
import io.grpc.ForwardingServerCallListener.SimpleForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.util.Set;

/**
 * One log line per gRPC call: method, the volume (or name) it concerns, duration, status code and
 * message. A handler that throws instead of answering is logged with its stack trace and answered
 * with INTERNAL, so the caller never sees a trace. At debug verbosity the request is logged too,
 * with its secret fields removed.
 */
public final class CallLog implements ServerInterceptor {

    /** Health checks arrive every few seconds; when they succeed they are logged only at debug verbosity. */
    private static final Set<String> QUIET_METHODS = Set.of("csi.v1.Identity/Probe");

    private final Log log;

    public CallLog(Log log) {
        this.log = log;
    }

    @Override
    public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(
            ServerCall<ReqT, RespT> call, Metadata headers, ServerCallHandler<ReqT, RespT> next) {
        String method = call.getMethodDescriptor().getFullMethodName();
        LoggedCall<ReqT, RespT> logged = new LoggedCall<>(call, method, System.nanoTime());
        ServerCall.Listener<ReqT> listener = next.startCall(logged, headers);
        return new SimpleForwardingServerCallListener<>(listener) {
            @Override
            public void onMessage(ReqT request) {
                if (request instanceof Message message) {
                    logged.subject = subjectOf(message);
                    if (log.debugEnabled()) {
                        log.debug("request", "method", method,
                                "request", TextFormat.printer().shortDebugString(Secrets.redact(message)));
                    }
                }
                super.onMessage(request);
            }

            @Override
            public void onHalfClose() {
                try {
                    super.onHalfClose();
                } catch (RuntimeException | Error e) {
                    log.error("handler failed", e, "method", method);
                    logged.closeIfOpen(Status.INTERNAL.withDescription(
                            "internal error in " + method + "; see the driver log"));
                }
            }
        };
    }

    /** The field that names what a request is about, for the log line. */
    private static String[] subjectOf(Message request) {
        for (String name : new String[] {"volume_id", "source_volume_id", "snapshot_id", "name"}) {
            FieldDescriptor field = request.getDescriptorForType().findFieldByName(name);
            if (field != null && field.getType() == FieldDescriptor.Type.STRING && request.hasField(field)) {
                return new String[] {name, (String) request.getField(field)};
            }
        }
        return null;
    }

    private final class LoggedCall<ReqT, RespT> extends SimpleForwardingServerCall<ReqT, RespT> {
        private final String method;
        private final long startNanos;
        private volatile String[] subject;
        private boolean closed;

        LoggedCall(ServerCall<ReqT, RespT> call, String method, long startNanos) {
            super(call);
            this.method = method;
            this.startNanos = startNanos;
        }

        @Override
        public synchronized void close(Status status, Metadata trailers) {
            closed = true;
            String durationMs = String.format("%.3f", (System.nanoTime() - startNanos) / 1e6);
            String[] about = subject == null ? new String[] {"volume_id", null} : subject;
            Object[] fields = {
                "method", method, about[0], about[1], "duration_ms", durationMs,
                "code", status.getCode(), "error", status.getDescription()
            };
            if (status.isOk() && QUIET_METHODS.contains(method)) {
                log.debug("call", fields);
            } else if (status.isOk()) {
                log.info("call", fields);
            } else {
                log.warn("call", fields);
            }
            super.close(status, trailers);
        }

        synchronized void closeIfOpen(Status status) {
            if (!closed) {
                close(status, new Metadata());
            }
        }
    }
}
