package dev.strata.csi.controller.local;

import dev.strata.csi.metrics.Buckets;
import dev.strata.csi.metrics.StatusCodes;
import io.grpc.Status;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

/** Volume content this controller relayed between nodes (restores and clones across nodes): bytes, and how long each copy took. */
public final class RelayMetrics {

    private final Counter bytes;
    private final Histogram copies;

    public RelayMetrics(PrometheusRegistry registry) {
        bytes = Counter.builder()
                .name("strata_relayed_bytes_total")
                .help("Data bytes of volume content relayed from one node's agent to another's, by source and target node")
                .labelNames("source_node", "target_node")
                .register(registry);
        copies = Histogram.builder()
                .name("strata_relay_seconds")
                .help("Duration of each attempt to copy a volume's content across nodes, by gRPC status code (a resumed copy is one more attempt)")
                .labelNames("grpc_status_code")
                .classicOnly()
                .classicUpperBounds(Buckets.OPERATIONS)
                .register(registry);
    }

    void relayed(String source, String target, long count) {
        bytes.labelValues(source, target).inc(count);
    }

    void copied(String source, String target, Status.Code outcome, long startNanos) {
        copies.labelValues(StatusCodes.goName(outcome)).observe((System.nanoTime() - startNanos) / 1e9);
    }
}
