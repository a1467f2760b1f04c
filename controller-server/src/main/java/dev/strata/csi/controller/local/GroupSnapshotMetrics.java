package dev.strata.csi.controller.local;

import dev.strata.csi.metrics.Buckets;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.time.Duration;

/** Group snapshots as the controller cuts them: how long each took, how long its filesystems stayed frozen, and failures. */
public final class GroupSnapshotMetrics {

    private final Histogram duration;
    private final Histogram window;
    private final Counter failures;

    public GroupSnapshotMetrics(PrometheusRegistry registry) {
        duration = Histogram.builder()
                .name("strata_group_snapshot_seconds")
                .help("Duration of the group snapshots cut: freeze on every node, take, thaw, commit")
                .classicOnly()
                .classicUpperBounds(Buckets.OPERATIONS)
                .register(registry);
        window = Histogram.builder()
                .name("strata_group_snapshot_freeze_window_seconds")
                .help("A group snapshot's freeze window: the longest time any member's filesystem was frozen, from its FIFREEZE to its FITHAW")
                .classicOnly()
                .classicUpperBounds(Buckets.OPERATIONS)
                .register(registry);
        failures = Counter.builder()
                .name("strata_group_snapshot_failures_total")
                .help("Group snapshot cuts that failed (their members taken so far removed)")
                .register(registry);
    }

    void taken(Duration took, Duration frozen) {
        duration.observe(took.toNanos() / 1e9);
        window.observe(frozen.toNanos() / 1e9);
    }

    void failed() {
        failures.inc();
    }
}
