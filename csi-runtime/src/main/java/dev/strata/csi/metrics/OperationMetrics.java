package dev.strata.csi.metrics;

import io.grpc.ForwardingServerCall.SimpleForwardingServerCall;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

/**
 * {@code csi_plugin_operations_seconds} of every call on a server, labelled as the CSI sidecars
 * label theirs (csi-lib-utils): driver_name, method_name (the full gRPC method,
 * {@code /csi.v1.Node/NodeStageVolume}) and grpc_status_code ({@code OK}, {@code InvalidArgument}).
 * Dashboards made for the sidecars' metrics then show the driver's side of the same calls.
 */
public final class OperationMetrics implements ServerInterceptor {

    private final Histogram operations;
    private final String driverName;

    public OperationMetrics(PrometheusRegistry registry, String driverName) {
        this.driverName = driverName;
        this.operations = Histogram.builder()
                .name("csi_plugin_operations_seconds")
                .help("Duration of the CSI calls this plugin served, by method and gRPC status code")
                .labelNames("driver_name", "method_name", "grpc_status_code")
                .classicOnly()
                .classicUpperBounds(Buckets.OPERATIONS)
                .register(registry);
    }

    @Override
    public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(
            ServerCall<ReqT, RespT> call, Metadata headers, ServerCallHandler<ReqT, RespT> next) {
        String method = "/" + call.getMethodDescriptor().getFullMethodName();
        long start = System.nanoTime();
        return next.startCall(new SimpleForwardingServerCall<>(call) {
            @Override
            public void close(Status status, Metadata trailers) {
                operations.labelValues(driverName, method, StatusCodes.goName(status.getCode()))
                        .observe((System.nanoTime() - start) / 1e9);
                super.close(status, trailers);
            }
        }, headers);
    }
}
