package dev.strata.csi.node.local;

import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.IoLimits;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.node.cgroup.DeviceLimits;
import dev.strata.csi.node.cgroup.PodCgroups;
import dev.strata.csi.node.cgroup.PodUid;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A local volume's IO limits: recorded with the image (its record is the desired state), and
 * applied to every pod on this node the volume is published to, in that pod's cgroup for the
 * volume's loop device ({@link PodCgroups}). Which pods those are is read from the mount table:
 * the mounts of the volume's device at kubelet's target paths, which carry the pod's UID. So the
 * limits follow the volume wherever kubelet publishes it, and a pass after a restart finds the
 * same pods again.
 *
 * <p>Nothing is removed at unpublish: the limits are on the pod's own cgroup, which kubelet
 * removes with the pod, and a pod whose volume is unpublished does no more IO on it.
 *
 * <p>The record is written under the volume's lock, as every change of an image is. Applying
 * reads it and writes the cgroups one volume at a time on this node (synchronized): whichever
 * application runs last has read the latest record. So the periodic pass takes no volume lock,
 * and never makes a CSI call or an agent call on the volume fail ABORTED.
 */
public final class VolumeIoLimits {

    private final NodePools pools;
    private final Mounter mounter;
    private final Path kubeletDir;
    private final PodCgroups cgroups;
    private final Log log;
    /** The pods each volume's limits were last applied to, for the metrics. */
    private final Map<String, Set<PodUid>> applied = new ConcurrentHashMap<>();
    /**
     * The pods each volume is published to whose cgroup does not hold its limits (none found, or a
     * write failed): the limits are recorded, the pod's IO is not throttled.
     */
    private final Map<String, Set<PodUid>> unapplied = new ConcurrentHashMap<>();
    private final Counter failures;

    public VolumeIoLimits(NodePools pools, Mounter mounter, Path kubeletDir, PodCgroups cgroups, PrometheusRegistry metrics, Log log) {
        this.pools = pools;
        this.mounter = mounter;
        this.kubeletDir = kubeletDir;
        this.cgroups = cgroups;
        this.log = log;
        this.failures = Counter.builder()
                .name("strata_io_limit_failures_total")
                .help("Times a volume's IO limits could not be written into a pod's cgroup (the log says why)")
                .register(metrics);
        GaugeWithCallback.builder()
                .name("strata_volume_io_limited_pods")
                .help("Pods on this node whose cgroup holds the volume's IO limits, as of the last time they were applied")
                .labelNames("volume")
                .callback(callback -> applied.forEach((volume, pods) -> callback.call(pods.size(), volume)))
                .register(metrics);
        GaugeWithCallback.builder()
                .name("strata_volume_io_unlimited_pods")
                .help("Pods on this node the volume is published to whose cgroup does not hold its recorded IO limits"
                        + " (no pod cgroup under --cgroup-root, or a write failed): their IO on it is not throttled")
                .labelNames("volume")
                .callback(callback -> unapplied.forEach((volume, pods) -> callback.call(pods.size(), volume)))
                .register(metrics);
    }

    /**
     * Records the limits {@code changes} names (0 removes one; a limit it leaves unset stays) and
     * applies the volume's limits to the pods it is published to. NOT_FOUND for no such image.
     * Each step is repeatable: a call cut short is done again by the controller's retry, and the
     * next pass ({@link #applyAll}) applies what is recorded.
     */
    public Volume set(String name, dev.strata.csi.agent.api.IoLimits changes) throws Exception {
        ImageRecord record = pools.holding(name).content(name);
        IoLimits merged = merge(record.getIoLimits(), changes);
        if (!merged.equals(record.getIoLimits())) {
            pools.holding(name).records().recordIoLimits(name, merged);
            log.info("IO limits recorded", "volume", name, "limits", describe(merged));
        }
        apply(name);
        return pools.get(name).orElseThrow(() -> CsiException.notFound("volume " + name + " does not exist on this node"));
    }

    /**
     * The volume's limits applied to every pod it is published to on this node; nothing to do while
     * it is not attached, or for a volume that never had limits (no rule of the driver's to keep or
     * to remove).
     */
    public synchronized void apply(String name) throws Exception {
        Optional<DeviceLimits> limits = recorded(name);
        Optional<? extends BlockDevice> device = pools.holding(name).device(name);
        if (limits.isEmpty() || device.isEmpty()) {
            applied.remove(name);
            unapplied.remove(name);
            return;
        }
        Set<PodUid> pods = new LinkedHashSet<>();
        for (MountPoint mount : mounter.table().all()) {
            if (device.get().backs(mount)) {
                PodUid.ofTargetPath(kubeletDir, mount.mountPoint()).ifPresent(pods::add);
            }
        }
        Set<PodUid> limited = ConcurrentHashMap.newKeySet();
        Set<PodUid> unlimited = ConcurrentHashMap.newKeySet();
        for (PodUid pod : pods) {
            (limitPod(name, pod, device.get(), limits.get()) ? limited : unlimited).add(pod);
        }
        keep(applied, name, limits.get().none() ? Set.of() : limited);
        keep(unapplied, name, limits.get().none() ? Set.of() : unlimited);
    }

    /**
     * The volume's limits applied to the pod {@code target} is for (NodePublishVolume, which
     * kubelet repeats for volumes in use after node-server restarts): kubelet makes the pod's
     * cgroup before it asks for the pod's volumes. A target that is no pod's changes nothing.
     */
    public synchronized void applyAt(String name, Path target) throws Exception {
        Optional<PodUid> pod = PodUid.ofTargetPath(kubeletDir, target);
        Optional<DeviceLimits> limits = recorded(name);
        Optional<? extends BlockDevice> device = pools.holding(name).device(name);
        if (pod.isEmpty() || limits.isEmpty() || device.isEmpty()) {
            return;
        }
        boolean inForce = limitPod(name, pod.get(), device.get(), limits.get());
        if (!limits.get().none()) {
            PodUid uid = pod.get();
            (inForce ? applied : unapplied).computeIfAbsent(name, volume -> ConcurrentHashMap.newKeySet()).add(uid);
            (inForce ? unapplied : applied).computeIfPresent(name, (volume, pods) -> pods.remove(uid) && pods.isEmpty() ? null : pods);
        }
    }

    private static void keep(Map<String, Set<PodUid>> byVolume, String name, Set<PodUid> pods) {
        if (pods.isEmpty()) {
            byVolume.remove(name);
        } else {
            byVolume.put(name, pods);
        }
    }

    /**
     * Whether the pod's cgroup now holds the limits; a failure is logged and counted, and the next
     * pass tries again. A pod without a cgroup is warned about once, when it starts to run
     * unthrottled: kubelet makes a pod's cgroup before it asks for the pod's volumes, so where none
     * is found (but for a pod being removed) kubelet makes none (cgroupsPerQOS: false, a cgroup root
     * of its own) or the host's hierarchy is not at --cgroup-root.
     */
    private boolean limitPod(String name, PodUid pod, BlockDevice device, DeviceLimits limits) {
        boolean wasUnlimited = unapplied.getOrDefault(name, Set.of()).contains(pod);
        try {
            boolean found = cgroups.limit(pod, device.deviceNumber(), limits);
            if (!found && !limits.none() && !wasUnlimited) {
                log.warn("IO limits recorded but not applied: the pod has no cgroup under --cgroup-root, so its IO on the"
                        + " volume is not throttled (the node needs kubelet's pod cgroups: cgroupsPerQOS true, its default;"
                        + " docs/attributes.md)", "volume", name, "pod", pod);
            } else if (found && wasUnlimited) {
                log.info("IO limits now applied to a pod that ran without them", "volume", name, "pod", pod);
            }
            return found;
        } catch (IOException | RuntimeException e) {
            failures.inc();
            log.error("cannot apply IO limits to a pod; trying again at the next pass", "volume", name, "pod", pod,
                    "device", device.deviceNumber(), "error", e.getMessage());
            return false;
        }
    }

    /**
     * The limits of every attached volume applied again: at start (node-server restarted: the pods
     * keep their cgroups, and a limit changed while it was down is applied), then every
     * --io-limits-resync, which brings a container started after its pod's volume was published
     * under the limits on cgroup v1 (each container's cgroup holds its own there), and a pod whose
     * cgroup was not there yet.
     */
    public void applyAll() {
        try {
            for (Volume image : pools.list()) {
                if (image.getDevicePath().isEmpty()) {
                    applied.remove(image.getName());
                    unapplied.remove(image.getName());
                    continue;
                }
                try {
                    apply(image.getName());
                } catch (CsiException e) {
                    if (e.code() != Status.Code.NOT_FOUND) { // NOT_FOUND: deleted since the listing
                        log.error("cannot apply a volume's IO limits", "volume", image.getName(), "error", e.getMessage());
                    }
                } catch (Exception e) {
                    log.error("cannot apply a volume's IO limits", "volume", image.getName(), "error", e.toString());
                }
            }
        } catch (Exception e) {
            log.error("cannot list the volumes to apply their IO limits", "error", e.toString());
        }
    }

    /** The recorded limits with the changes made: a set field replaces, 0 removes. */
    static IoLimits merge(IoLimits recorded, dev.strata.csi.agent.api.IoLimits changes) {
        IoLimits.Builder merged = recorded.toBuilder();
        if (changes.hasReadIops()) {
            merged.setReadIops(nonNegative(changes.getReadIops()));
        }
        if (changes.hasWriteIops()) {
            merged.setWriteIops(nonNegative(changes.getWriteIops()));
        }
        if (changes.hasReadBytesPerSecond()) {
            merged.setReadBytesPerSecond(nonNegative(changes.getReadBytesPerSecond()));
        }
        if (changes.hasWriteBytesPerSecond()) {
            merged.setWriteBytesPerSecond(nonNegative(changes.getWriteBytesPerSecond()));
        }
        return merged.build();
    }

    private static long nonNegative(long limit) {
        if (limit < 0) {
            throw CsiException.invalidArgument("an IO limit must not be negative, got " + limit);
        }
        return limit;
    }

    /** The volume's recorded limits; empty when it never had any. */
    private Optional<DeviceLimits> recorded(String name) throws IOException {
        ImageRecord record = pools.holding(name).content(name);
        return record.hasIoLimits() ? Optional.of(limits(record.getIoLimits())) : Optional.empty();
    }

    static DeviceLimits limits(IoLimits recorded) {
        return new DeviceLimits(recorded.getReadIops(), recorded.getWriteIops(), recorded.getReadBytesPerSecond(),
                recorded.getWriteBytesPerSecond());
    }

    private static String describe(IoLimits limits) {
        return "readIOPS=" + limits.getReadIops() + " writeIOPS=" + limits.getWriteIops() + " readBytesPerSecond="
                + limits.getReadBytesPerSecond() + " writeBytesPerSecond=" + limits.getWriteBytesPerSecond() + " (0: none)";
    }
}
