package dev.strata.csi.node.local.blocks;

import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.node.local.pool.VolumePool;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Known blocks written into a volume between snapshots, and the checks on what a
 * {@link ChangedBlocks} engine answers: every written range covered, nothing reported farther
 * than the engine's granularity from one.
 */
public final class BlockPattern {

    public static final int BLOCK = 4096;

    /** What an engine sent: the ranges, and the bytes it read to tell. */
    public record Answer(List<BlockRange> ranges, long bytesRead) {
        public long rangeBytes() {
            return ranges.stream().mapToLong(BlockRange::length).sum();
        }
    }

    private BlockPattern() {}

    /** The first block, the last, one range across a 64 KiB boundary, and one in the middle, of a volume of {@code size}. */
    public static List<BlockRange> firstLastAndAcross(long size, long salt) {
        return List.of(new BlockRange(0, BLOCK), new BlockRange(64 * 1024 - BLOCK, 3 * BLOCK),
                new BlockRange((size / 2 + salt * 1024 * 1024) / BLOCK * BLOCK, BLOCK), new BlockRange(size - BLOCK, BLOCK));
    }

    /** Writes {@code value} over each range of {@code target} (a device or a file) and syncs it. */
    public static void write(Path target, List<BlockRange> ranges, byte value) throws IOException {
        try (FileChannel channel = FileChannel.open(target, StandardOpenOption.WRITE)) {
            for (BlockRange range : ranges) {
                ByteBuffer data = ByteBuffer.allocate((int) range.length());
                for (int i = 0; i < data.capacity(); i++) {
                    data.put(i, (byte) (value + (range.offset() + i) % 7)); // by offset: the same value over a block writes the same bytes
                }
                while (data.hasRemaining()) {
                    channel.write(data, range.offset() + data.position());
                }
            }
            channel.force(true);
        }
    }

    public static Answer allocated(VolumePool pool, String snapshot, long from) throws Exception {
        Collector sink = new Collector();
        SnapshotRecord record = pool.snapshots().ready(snapshot);
        pool.changedBlocks().allocated(record, from, sink);
        return sink.answer();
    }

    public static Answer changed(VolumePool pool, String base, String target, long from) throws Exception {
        Collector sink = new Collector();
        pool.changedBlocks().changed(pool.snapshots().ready(base), pool.snapshots().ready(target), from, sink);
        return sink.answer();
    }

    /** Every byte of {@code written} lies in a reported range; the ranges ascend without overlap. */
    public static void assertCovers(List<BlockRange> reported, List<BlockRange> written) {
        for (int i = 1; i < reported.size(); i++) {
            assertTrue(reported.get(i - 1).end() <= reported.get(i).offset(), "ranges out of order or overlapping: " + reported);
        }
        for (BlockRange range : written) {
            for (long at = range.offset(); at < range.end(); at += BLOCK) {
                long byteAt = at;
                assertTrue(reported.stream().anyMatch(r -> r.offset() <= byteAt && byteAt < r.end()),
                        "written block at " + byteAt + " not reported in " + reported);
            }
        }
    }

    /** Every reported byte lies within {@code granularity}-aligned bounds of a written range. */
    public static void assertNear(List<BlockRange> reported, List<BlockRange> written, long granularity) {
        for (BlockRange range : reported) {
            for (long at = range.offset(); at < range.end(); at += BLOCK) {
                long byteAt = at;
                assertTrue(written.stream().anyMatch(w -> w.offset() / granularity * granularity <= byteAt
                                && byteAt < (w.end() + granularity - 1) / granularity * granularity),
                        "reported block at " + byteAt + " is farther than " + granularity + " bytes from any written range " + written
                                + " (reported " + reported + ")");
            }
        }
    }

    private static final class Collector implements RangeSink {
        final List<BlockRange> ranges = new ArrayList<>();
        long read;

        @Override
        public void accept(BlockRange range) {
            ranges.add(range);
        }

        @Override
        public void read(long bytes) {
            read += bytes;
        }

        Answer answer() {
            return new Answer(List.copyOf(ranges), read);
        }
    }
}
