package dev.strata.csi.controller.local;

import dev.strata.csi.metrics.Buckets;
import dev.strata.csi.metrics.StatusCodes;
import io.grpc.Status;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.util.function.Supplier;
import java.util.stream.Stream;

/**
 * Content this controller relayed between nodes: bytes, and how long each copy took, by what was
 * copied ({@code content}: {@value #VOLUME}, a restore or clone onto another node, or
 * {@value #SNAPSHOT_COPY}, a snapshot's copy to a node that keeps it); and the snapshot copies
 * not complete yet, with their age.
 */
public final class RelayMetrics {

    /** The {@code content} label of a restore or clone onto another node. */
    static final String VOLUME = "volume";
    /** The {@code content} label of a snapshot's copy (VolumeSnapshotClass parameter copies). */
    static final String SNAPSHOT_COPY = "snapshot_copy";

    /** A copy of a snapshot not complete yet, to the node that is to keep it; its age since the snapshot was taken. */
    record Unready(String snapshot, String targetNode, double ageSeconds) {}

    private final PrometheusRegistry registry;
    private final Counter bytes;
    private final Histogram copies;

    public RelayMetrics(PrometheusRegistry registry) {
        this.registry = registry;
        bytes = Counter.builder()
                .name("strata_relayed_bytes_total")
                .help("Data bytes of content relayed from one node's agent to another's, by source and target node and what was copied"
                        + " (volume: a restore or clone onto another node; snapshot_copy: a snapshot's copy)")
                .labelNames("source_node", "target_node", "content")
                .register(registry);
        copies = Histogram.builder()
                .name("strata_relay_seconds")
                .help("Duration of each attempt to copy content across nodes, by what was copied and gRPC status code"
                        + " (a resumed copy is one more attempt)")
                .labelNames("content", "grpc_status_code")
                .classicOnly()
                .classicUpperBounds(Buckets.OPERATIONS)
                .register(registry);
    }

    /** Registers the gauge of the snapshot copies not complete yet, read from {@code unready} at each scrape. */
    void watch(Supplier<Stream<Unready>> unready) {
        GaugeWithCallback.builder()
                .name("strata_snapshot_copy_unready_seconds")
                .help("Each copy of a snapshot (VolumeSnapshotClass parameter copies) not complete yet, by snapshot and the node"
                        + " to keep it: seconds since the snapshot was taken; the snapshot is not ready to use until none is left")
                .labelNames("snapshot", "target_node")
                .callback(callback -> unready.get().forEach(copy -> callback.call(copy.ageSeconds(), copy.snapshot(), copy.targetNode())))
                .register(registry);
    }

    void relayed(String source, String target, String content, long count) {
        bytes.labelValues(source, target, content).inc(count);
    }

    void copied(String content, Status.Code outcome, long startNanos) {
        copies.labelValues(content, StatusCodes.goName(outcome)).observe((System.nanoTime() - startNanos) / 1e9);
    }
}
