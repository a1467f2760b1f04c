package dev.strata.csi.node.agent;

import dev.strata.csi.metrics.Buckets;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

/** Content this node sent to, and received from, other nodes (restores and clones across nodes). */
final class TransferMetrics {

    private final Counter bytes;
    private final Histogram received;

    TransferMetrics(PrometheusRegistry registry) {
        bytes = Counter.builder()
                .name("strata_transfer_bytes_total")
                .help("Data bytes of volume and snapshot content streamed to other nodes (sent) and from them (received)")
                .labelNames("direction")
                .register(registry);
        received = Histogram.builder()
                .name("strata_transfer_receive_seconds")
                .help("Duration of the streams that wrote another node's content into a volume here, by outcome")
                .labelNames("outcome")
                .classicOnly()
                .classicUpperBounds(Buckets.OPERATIONS)
                .register(registry);
    }

    void sent(long count) {
        bytes.labelValues("sent").inc(count);
    }

    void received(long count) {
        bytes.labelValues("received").inc(count);
    }

    /** A receiving stream ended: {@code outcome} is complete, interrupted (resumable) or refused. */
    void receiveEnded(String outcome, long startNanos) {
        received.labelValues(outcome).observe((System.nanoTime() - startNanos) / 1e9);
    }
}
