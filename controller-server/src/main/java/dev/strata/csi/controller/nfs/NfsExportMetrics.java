package dev.strata.csi.controller.nfs;

import dev.strata.csi.backend.nfs.NfsVolume;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Gauge;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

/**
 * The NFS exports as controller-server last found them, labelled {@code export="server:/share"}:
 * free bytes and whether the export answered, both as of the last GetCapacity (external-provisioner
 * asks every minute per StorageClass) or mount, and mount failures. Set by the calls, never read
 * at a scrape: a scrape must not wait on a dead NFS server.
 */
public final class NfsExportMetrics {

    private final Gauge available;
    private final Gauge reachable;
    private final Counter mountFailures;

    public NfsExportMetrics(PrometheusRegistry registry) {
        available = Gauge.builder()
                .name("strata_nfs_export_available_bytes")
                .help("Free bytes of the NFS export, as of the last GetCapacity for it")
                .labelNames("export")
                .register(registry);
        reachable = Gauge.builder()
                .name("strata_nfs_export_reachable")
                .help("1 if the export answered the last GetCapacity or mount, 0 if it failed UNAVAILABLE (not mountable, or past --nfs-timeout)")
                .labelNames("export")
                .register(registry);
        mountFailures = Counter.builder()
                .name("strata_nfs_export_mount_failures_total")
                .help("Mounts of the export by controller-server that failed")
                .labelNames("export")
                .register(registry);
    }

    void answered(NfsVolume export, long availableBytes) {
        available.labelValues(export.source()).set(availableBytes);
        reachable.labelValues(export.source()).set(1);
    }

    void unreachable(NfsVolume export) {
        reachable.labelValues(export.source()).set(0);
    }

    void mountFailed(NfsVolume export) {
        mountFailures.labelValues(export.source()).inc();
        unreachable(export);
    }
}
