package dev.strata.csi.agent;

import dev.strata.csi.backend.local.VolumeIoLimits;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.server.Component;
import java.time.Duration;

/**
 * Applies every volume's recorded IO limits again ({@link VolumeIoLimits#applyAll}): at start,
 * once the pool is reconciled and before any call is served (node-server restarted: the pods keep
 * their cgroups, and a limit changed while it was down is applied), then every period. The period
 * brings a container started after its pod's volume was published under the limits on cgroup v1,
 * where each container's cgroup holds its own ({@code SystemPodCgroups}), and a pod whose cgroup
 * was not there yet. Each volume is done under its lock; one that is busy waits for the next pass.
 */
public final class IoLimitsResync implements Component {

    private final VolumeIoLimits limits;
    private final VolumeLocks locks;
    private final Duration period;
    private final Log log;
    private Thread loop;

    /** {@code period} of zero: only at start. */
    public IoLimitsResync(VolumeIoLimits limits, VolumeLocks locks, Duration period, Log log) {
        this.limits = limits;
        this.locks = locks;
        this.period = period;
        this.log = log;
    }

    @Override
    public void start() {
        limits.applyAll(locks);
        if (period.isZero()) {
            log.info("IO limits are applied at start, at publish and when changed only: --io-limits-resync is 0");
            return;
        }
        loop = Thread.ofPlatform().daemon(true).name("io-limits-resync").start(() -> {
            try {
                while (true) {
                    Thread.sleep(period);
                    limits.applyAll(locks);
                }
            } catch (InterruptedException e) {
                // stopped
            }
        });
    }

    @Override
    public void stop(Duration grace) {
        if (loop != null) {
            loop.interrupt();
            try {
                loop.join(grace.toMillis() + 1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
