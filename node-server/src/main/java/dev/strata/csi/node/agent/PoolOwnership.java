package dev.strata.csi.node.agent;

import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.server.Component;
import dev.strata.csi.server.StartupException;
import dev.strata.csi.system.ExclusiveLock;
import java.nio.file.Path;
import java.time.Duration;

/**
 * This agent's claim on its pools: one agent per pool (a second one pointed at the same
 * directory by mistake refuses to start), and the pool reconciled with the kernel before any
 * call is served (the LVM pool's records are in the image pool's directory, so its lock covers both). Until then the node reports itself not ready.
 */
public final class PoolOwnership implements Component {

    static final String LOCK_FILE = ".pool.lock";

    private final NodePools pools;
    private ExclusiveLock lock;
    private volatile boolean ready;

    public PoolOwnership(NodePools pools) {
        this.pools = pools;
    }

    @Override
    public void start() throws StartupException {
        Path dir = pools.images().dir();
        Path lockFile = dir.resolve(LOCK_FILE);
        try {
            lock = ExclusiveLock.tryAcquire(lockFile).orElseThrow(() -> new StartupException(
                    "another node agent owns pool " + dir + " (" + lockFile + " is locked)"));
            pools.reconcile();
        } catch (StartupException e) {
            throw e;
        } catch (Exception e) {
            stop(Duration.ZERO);
            throw new StartupException("cannot reconcile pool " + dir + ": " + e.getMessage(), e);
        }
        ready = true;
    }

    /** Whether the pool is owned and reconciled: what Probe reports. */
    public boolean ready() {
        return ready;
    }

    @Override
    public void stop(Duration grace) {
        ready = false;
        if (lock != null) {
            lock.close();
        }
    }
}
