package dev.strata.csi.node.local.pool;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The filesystems of a group snapshot's volumes on this node, frozen together for its cut: every
 * freeze recorded first ({@link Freezes}), so the next start thaws what a crash left frozen, then
 * all frozen at once. A block volume, or one not mounted on this node, has no filesystem of the
 * driver's to freeze.
 *
 * <p>The cut needs every member frozen at one moment, which the take proves (the controller sends
 * it once every node is frozen), not every member frozen until the last copy: each member is
 * thawed as soon as its own copy is made ({@link #thawTaken}). {@link #release} thaws whatever is
 * still frozen, once, whoever calls it first: the cut, its deadline, or the end of the
 * controller's stream; then forgets the freezes. The freeze window is the longest time one
 * member's filesystem was frozen, from its FIFREEZE to its FITHAW: what that volume's writers
 * waited. It holds no record write.
 */
public final class FrozenVolumes {

    /** The frozen filesystems by volume, in the order given. */
    private final Map<String, Freezes.Frozen> frozen;
    private volatile boolean released;

    private FrozenVolumes(Map<String, Freezes.Frozen> frozen) {
        this.frozen = frozen;
    }

    /** Freezes the mounted filesystems of {@code volumes}; on a failure, thaws those it froze and rethrows. */
    static FrozenVolumes freeze(NodePools pools, List<String> volumes) throws IOException, DeviceException, MountException {
        Map<String, Freezes.Frozen> recorded = new LinkedHashMap<>();
        try {
            for (String volume : volumes) {
                VolumePool pool = pools.holding(volume);
                if (!pool.exists(volume)) {
                    throw CsiException.notFound("volume " + volume + " does not exist on this node");
                }
                Optional<Path> mount = pool.filesystemMount(volume);
                if (mount.isPresent()) {
                    recorded.put(volume, pools.images().freezes().record(volume, mount.get()));
                }
            }
            Concurrently.run(List.copyOf(recorded.values()), Freezes.Frozen::freeze);
        } catch (IOException | DeviceException | MountException | RuntimeException e) {
            new FrozenVolumes(recorded).release();
            throw e;
        }
        return new FrozenVolumes(recorded);
    }

    public int count() {
        return frozen.size();
    }

    /**
     * Thaws the filesystem of {@code volume}, whose member is taken (nothing when it has none, or
     * when {@link #release} thawed it already). Its freeze stays recorded until {@link #release}.
     */
    public void thawTaken(String volume) throws DeviceException {
        Freezes.Frozen one = frozen.get(volume);
        if (one != null) {
            one.thaw();
        }
    }

    /** Whether {@link #release} was called: a member thawed by it may have been copied after writes that followed the cut. */
    public boolean released() {
        return released;
    }

    /**
     * Thaws every filesystem still frozen, then forgets the freezes, the first time only; returns
     * the freeze window. A thaw that fails leaves its record for the next start, and is thrown
     * once the others are thawed.
     */
    public synchronized Duration release() throws IOException, DeviceException {
        if (!released) {
            released = true;
            try {
                Concurrently.run(List.copyOf(frozen.values()), Freezes.Frozen::thaw);
            } catch (MountException e) {
                throw new IllegalStateException(e); // a thaw mounts nothing
            }
            for (Freezes.Frozen one : frozen.values()) {
                if (!one.thawFailed()) { // a failed FITHAW keeps its record for the next start
                    one.forget();
                }
            }
        }
        return window();
    }

    /** The longest time one filesystem was frozen, from its FIFREEZE to its FITHAW (zero when none was). */
    private Duration window() {
        long longest = 0;
        for (Freezes.Frozen one : frozen.values()) {
            longest = Math.max(longest, one.frozenFor());
        }
        return Duration.ofNanos(longest);
    }

    /** When the first FIFREEZE was called (System.nanoTime()), for a timeline; 0 when nothing was frozen. */
    public long freezing() {
        return frozen.values().stream().mapToLong(Freezes.Frozen::freezing).filter(t -> t != 0).min().orElse(0);
    }

    /** Each filesystem's FIFREEZE call, its return and its FITHAW's return, in ms from {@code origin} (System.nanoTime()). */
    public String timeline(long origin) {
        StringBuilder out = new StringBuilder();
        frozen.forEach((volume, one) -> out.append(String.format("%s:%.1f/%.1f/%.1f ", volume, (one.freezing() - origin) / 1e6,
                (one.frozenAt() - origin) / 1e6, (one.thawedAt() - origin) / 1e6)));
        return out.toString().strip();
    }
}
