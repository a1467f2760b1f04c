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
 * The filesystems of a group snapshot's volumes on this node, frozen together for its cut: every
 * freeze recorded first ({@link Freezes}), so the next start thaws what a crash left frozen, then
 * all frozen at once. A block volume, or one not mounted on this node, has no filesystem of the
 * driver's to freeze. {@link #thaw} thaws them all once, whoever calls it first: the cut, its
 * deadline, or the end of the controller's stream. The freeze window, what the volumes' writers
 * wait, runs from the first FIFREEZE to the last FITHAW, and holds no record write.
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
        List<Freezes.Frozen> recorded = new ArrayList<>();
        long start = System.nanoTime();
        try {
            for (String volume : volumes) {
                VolumePool pool = pools.holding(volume);
                if (!pool.exists(volume)) {
                    throw CsiException.notFound("volume " + volume + " does not exist on this node");
                }
                Optional<Path> mount = pool.filesystemMount(volume);
                if (mount.isPresent()) {
                    recorded.add(pools.images().freezes().record(volume, mount.get()));
                }
            }
            start = System.nanoTime();
            Concurrently.run(recorded, Freezes.Frozen::freeze);
        } catch (IOException | DeviceException | MountException | RuntimeException e) {
            new FrozenVolumes(recorded, start).thaw();
            throw e;
        }
        return new FrozenVolumes(recorded, start);
    }

    /** When the first FIFREEZE was called (System.nanoTime()). */
    public long freezing() {
        return frozenAt;
    }

    /** Each filesystem's FIFREEZE call, its return and its FITHAW's return, in ms from {@code origin} (System.nanoTime()). */
    public String timeline(long origin) {
        StringBuilder out = new StringBuilder();
        for (Freezes.Frozen one : frozen) {
            out.append(String.format("%s:%.1f/%.1f/%.1f ", one.image(), (one.freezing() - origin) / 1e6, (one.frozenAt() - origin) / 1e6,
                    (one.thawedAt() - origin) / 1e6));
        }
        return out.toString().strip();
    }

    public int count() {
        return frozen.size();
    }

    public synchronized boolean thawed() {
        return window >= 0;
    }

    /**
     * Thaws every filesystem, then forgets the freezes, the first time only; returns the freeze
     * window. A thaw that fails leaves its record for the next start, and is thrown once the
     * others are thawed.
     */
    public synchronized Duration thaw() throws IOException, DeviceException {
        if (window >= 0) {
            return Duration.ofNanos(window);
        }
        try {
            Concurrently.run(frozen, Freezes.Frozen::thaw);
        } catch (MountException e) {
            throw new IllegalStateException(e); // a thaw mounts nothing
        } finally {
            window = System.nanoTime() - frozenAt;
        }
        for (Freezes.Frozen one : frozen) {
            one.forget();
        }
        return Duration.ofNanos(window);
    }
}
