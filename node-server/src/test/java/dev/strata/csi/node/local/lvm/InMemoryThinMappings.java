package dev.strata.csi.node.local.lvm;

import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.BlockRange;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The thin pool's mappings as a test tells them: each device's chunks mapped to data chunks, a
 * write mapping new data, a snapshot sharing its origin's map. Answers as thin_dump and thin_delta
 * would, chunk by chunk, adjacent chunks joined; a device it was never told of maps nothing, as a
 * new thin volume. {@link #failNext} fails the next call.
 */
public final class InMemoryThinMappings implements ThinMappings {

    public static final long CHUNK = 64 * 1024;

    private final Map<Long, TreeMap<Long, Long>> devices = new HashMap<>();
    private long nextData;
    private boolean failNext;

    /** Device {@code id} writes {@code length} bytes at {@code offset}: every chunk touched gets new data. */
    public synchronized void write(long id, long offset, long length) {
        TreeMap<Long, Long> map = devices.computeIfAbsent(id, i -> new TreeMap<>());
        for (long chunk = offset / CHUNK; chunk * CHUNK < offset + length; chunk++) {
            map.put(chunk, nextData++);
        }
    }

    /** Device {@code snapshot} is made a thin snapshot of {@code origin}: the same mappings. */
    public synchronized void snapshot(long origin, long snapshot) {
        devices.put(snapshot, new TreeMap<>(devices.getOrDefault(origin, new TreeMap<>())));
    }

    public synchronized void failNext() {
        failNext = true;
    }

    @Override
    public synchronized List<BlockRange> mapped(long id) throws DeviceException {
        injected();
        return joined(List.copyOf(devices.getOrDefault(id, new TreeMap<>()).keySet()));
    }

    @Override
    public synchronized List<BlockRange> differing(long base, long target) throws DeviceException {
        injected();
        TreeMap<Long, Long> left = devices.getOrDefault(base, new TreeMap<>());
        TreeMap<Long, Long> right = devices.getOrDefault(target, new TreeMap<>());
        TreeMap<Long, Boolean> chunks = new TreeMap<>();
        left.keySet().forEach(chunk -> chunks.put(chunk, true));
        right.keySet().forEach(chunk -> chunks.put(chunk, true));
        List<Long> differing = chunks.keySet().stream().filter(chunk -> !java.util.Objects.equals(left.get(chunk), right.get(chunk))).toList();
        return joined(differing);
    }

    private static List<BlockRange> joined(List<Long> chunks) {
        List<BlockRange> ranges = new ArrayList<>();
        for (long chunk : chunks) {
            BlockRange last = ranges.isEmpty() ? null : ranges.getLast();
            if (last != null && last.end() == chunk * CHUNK) {
                ranges.set(ranges.size() - 1, new BlockRange(last.offset(), last.length() + CHUNK));
            } else {
                ranges.add(new BlockRange(chunk * CHUNK, CHUNK));
            }
        }
        return ranges;
    }

    private void injected() throws DeviceException {
        if (failNext) {
            failNext = false;
            throw new DeviceException("thin_delta: exit 1: metadata snapshot unavailable (injected)");
        }
    }
}
