package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.IoLimits;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.node.local.DeviceException;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.util.List;
import java.util.Optional;

/**
 * The pool as a scrape sees it, read at the scrape: capacity and what new volumes can still get
 * (the figure GetCapacity reports), volumes, and loop devices attached for them. A read that
 * fails leaves the gauge out of that scrape rather than failing it.
 */
public final class PoolMetrics {

    private PoolMetrics() {}

    public static void register(NodePools pools, PrometheusRegistry registry) {
        ImagePool pool = pools.images();
        GaugeWithCallback.builder()
                .name("strata_pool_capacity_bytes")
                .help("Size of the filesystem holding the node's pool")
                .callback(callback -> status(pool).ifPresent(status -> callback.call(status.getTotalBytes())))
                .register(registry);
        GaugeWithCallback.builder()
                .name("strata_pool_available_bytes")
                .help("Bytes a new volume can get on this node: free space less what sparse images may still claim")
                .callback(callback -> status(pool).ifPresent(status -> callback.call(status.getAvailableBytes())))
                .register(registry);
        GaugeWithCallback.builder()
                .name("strata_pool_volumes")
                .help("Volumes in the node's pools (images and logical volumes)")
                .callback(callback -> volumes(pools).ifPresent(images -> callback.call(images.size())))
                .register(registry);
        GaugeWithCallback.builder()
                .name("strata_pool_attached_loop_devices")
                .help("Loop devices attached for the pool's volumes")
                .callback(callback -> images(pool).ifPresent(images ->
                        callback.call(images.stream().filter(image -> !image.getDevicePath().isEmpty()).count())))
                .register(registry);
        ioLimits(pools, registry);
    }

    /** The IO limits recorded for each volume, one series per limit it has; a volume without limits has none. */
    private static void ioLimits(NodePools pools, PrometheusRegistry registry) {
        GaugeWithCallback.builder()
                .name("strata_volume_io_limit")
                .help("A volume's IO limit (mutable parameter): per second, operations (read_iops, write_iops) or bytes "
                        + "(read_bytes_per_second, write_bytes_per_second)")
                .labelNames("volume", "limit")
                .callback(callback -> volumes(pools).ifPresent(images -> images.forEach(image -> {
                    IoLimits limits = image.getIoLimits();
                    if (limits.getReadIops() > 0) {
                        callback.call(limits.getReadIops(), image.getName(), "read_iops");
                    }
                    if (limits.getWriteIops() > 0) {
                        callback.call(limits.getWriteIops(), image.getName(), "write_iops");
                    }
                    if (limits.getReadBytesPerSecond() > 0) {
                        callback.call(limits.getReadBytesPerSecond(), image.getName(), "read_bytes_per_second");
                    }
                    if (limits.getWriteBytesPerSecond() > 0) {
                        callback.call(limits.getWriteBytesPerSecond(), image.getName(), "write_bytes_per_second");
                    }
                })))
                .register(registry);
    }

    private static Optional<PoolStatus> status(ImagePool pool) {
        try {
            return Optional.of(pool.status());
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    private static Optional<List<Volume>> volumes(NodePools pools) {
        try {
            return Optional.of(pools.list());
        } catch (IOException | DeviceException | RuntimeException e) {
            return Optional.empty();
        }
    }

    private static Optional<List<Volume>> images(ImagePool pool) {
        try {
            return Optional.of(pool.list());
        } catch (IOException | DeviceException | RuntimeException e) {
            return Optional.empty();
        }
    }
}
