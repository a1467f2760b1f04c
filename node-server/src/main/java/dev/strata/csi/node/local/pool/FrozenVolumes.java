package dev.strata.csi.node.local.pool;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The filesystems of a group snapshot's volumes on this node, frozen together for its cut: each
 * recorded before its freeze ({@link Freezes}), so the next start thaws what a crash left frozen.
 * A block volume, or one not mounted on this node, has no filesystem of the driver's to freeze.
 * {@link #thaw} thaws them all once, whoever calls it first: the cut, its deadline, or the end of
 * the controller's stream.
 */
public final class FrozenVolumes {

    private final List<Freezes.Frozen> frozen;
    private final long frozenAt;
    /** Nanoseconds from the first freeze to the last thaw, once thawed; -1 before. */
    private long window = -1;

    private FrozenVolumes(List<Freezes.Frozen> frozen, long frozenAt) {
        this.frozen = frozen;
        this.frozenAt = frozenAt;
    }

    /** Freezes the mounted filesystems of {@code volumes}; on a failure, thaws those it froze and rethrows. */
    static FrozenVolumes freeze(NodePools pools, List<String> volumes) throws IOException, DeviceException, MountException {
        List<Freezes.Frozen> frozen = new ArrayList<>();
        long start = System.nanoTime();
        try {
            for (String volume : volumes) {
                VolumePool pool = pools.holding(volume);
                if (!pool.exists(volume)) {
                    throw CsiException.notFound("volume " + volume + " does not exist on this node");
                }
                Optional<Path> mount = pool.filesystemMount(volume);
                if (mount.isPresent()) {
                    frozen.add(pools.images().freezes().freeze(volume, mount.get()));
                }
            }
        } catch (IOException | DeviceException | MountException | RuntimeException e) {
            new FrozenVolumes(frozen, start).thaw();
            throw e;
        }
        return new FrozenVolumes(frozen, start);
    }

    public int count() {
        return frozen.size();
    }

    public synchronized boolean thawed() {
        return window >= 0;
    }

    /**
     * Thaws every filesystem, the first time only; returns how long they were frozen (from the first
     * freeze to the last thaw). A thaw that fails is tried on the others all the same, and the
     * failure thrown once all are tried: the freeze record stays for the next start.
     */
    public synchronized Duration thaw() throws IOException, DeviceException {
        if (window >= 0) {
            return Duration.ofNanos(window);
        }
        Exception failed = null;
        for (Freezes.Frozen one : frozen) {
            try {
                one.close();
            } catch (IOException | DeviceException e) {
                failed = failed == null ? e : failed;
            }
        }
        window = System.nanoTime() - frozenAt;
        if (failed instanceof IOException io) {
            throw io;
        }
        if (failed instanceof DeviceException device) {
            throw device;
        }
        return Duration.ofNanos(window);
    }
}
