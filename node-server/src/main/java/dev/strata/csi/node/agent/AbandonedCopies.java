package dev.strata.csi.node.agent;

import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.pool.IncomingCopies;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.PoolSnapshots;
import dev.strata.csi.node.local.pool.SnapshotCopies;
import dev.strata.csi.node.local.pool.VolumePool;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.server.Component;
import dev.strata.csi.server.Periodic;
import io.grpc.Status;
import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.function.UnaryOperator;

/**
 * Removes the partly received volumes and snapshot copies nobody comes back for, in every pool
 * ({@link IncomingCopies#removeIfAbandoned}, {@link SnapshotCopies#removeIfAbandoned}): at start, once the pool is reconciled and before any
 * call is served, then every quarter of the expiry (at most every {@link #LONGEST_PERIOD}). Each
 * is looked at under its lock, the one its receive and write calls take: one a stream is writing
 * is busy, and left for the next round.
 */
public final class AbandonedCopies implements Component {

    /** The longest wait between two rounds, whatever the expiry. */
    static final Duration LONGEST_PERIOD = Duration.ofMinutes(5);

    private final NodePools pools;
    private final VolumeLocks locks;
    private final Duration expiry;
    private final Counter removed;
    private final Log log;
    private Periodic rounds;

    /** {@code expiry} of zero: nothing is ever removed. */
    public AbandonedCopies(NodePools pools, VolumeLocks locks, Duration expiry, PrometheusRegistry metrics, Log log) {
        this.pools = pools;
        this.locks = locks;
        this.expiry = expiry;
        this.log = log;
        this.removed = Counter.builder()
                .name("strata_abandoned_copies_removed_total")
                .help("Partly received volumes and snapshot copies removed after no transfer step for --abandoned-copy-expiry")
                .register(metrics);
    }

    @Override
    public void start() {
        if (expiry.isZero()) {
            log.info("abandoned copies are kept: --abandoned-copy-expiry is 0");
            return;
        }
        rounds = new Periodic("abandoned-copies", period(expiry), this::removeAbandoned);
        rounds.start();
    }

    /** A quarter of the expiry, so a volume goes at most a quarter late; at most {@link #LONGEST_PERIOD}. */
    static Duration period(Duration expiry) {
        Duration quarter = expiry.dividedBy(4);
        return quarter.compareTo(LONGEST_PERIOD) > 0 ? LONGEST_PERIOD : quarter;
    }

    /** One round: every RECEIVING volume that is not busy, looked at under its lock. */
    private void removeAbandoned() {
        for (VolumePool pool : pools.all()) {
            removeAbandoned(pool.incoming()::names, name -> name, pool.incoming()::removeIfAbandoned);
            removeAbandoned(pool.snapshotCopies()::names, PoolSnapshots::lockKey, pool.snapshotCopies()::removeIfAbandoned);
        }
    }

    /** The names being received, of volumes or of snapshot copies. */
    @FunctionalInterface
    private interface Names {
        List<String> get() throws IOException;
    }

    /** Removes the one of that name if abandoned; returns whether it did. */
    @FunctionalInterface
    private interface Removal {
        boolean removeIfAbandoned(String name, Duration expiry) throws Exception;
    }

    private void removeAbandoned(Names names, UnaryOperator<String> lockKey, Removal removal) {
        try {
            for (String name : names.get()) {
                try (var held = locks.acquire(lockKey.apply(name))) {
                    if (removal.removeIfAbandoned(name, expiry)) {
                        removed.inc();
                    }
                } catch (CsiException e) {
                    if (e.code() != Status.Code.ABORTED) { // ABORTED: a transfer step holds it, so it is not abandoned
                        log.error("cannot remove abandoned copy; trying again later", "name", name, "error", e.getMessage());
                    }
                } catch (Exception e) {
                    log.error("cannot remove abandoned copy; trying again later", "name", name, "error", e.toString());
                }
            }
        } catch (Exception e) {
            log.error("cannot list what is being received; trying again later", "error", e.toString());
        }
    }

    @Override
    public void stop(Duration grace) {
        if (rounds != null) {
            rounds.stop(grace);
        }
    }
}
