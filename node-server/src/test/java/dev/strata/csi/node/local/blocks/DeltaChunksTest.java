package dev.strata.csi.node.local.blocks;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A whole read cut to the changed ranges: data within them sent, zero blocks and the holes the
 * read skipped within them sent as zero ranges (joined), everything outside them left out, in
 * ascending order; a resumed stream leaves out what lies before its start.
 */
class DeltaChunksTest {

    private static final int BLOCK = 4096;

    /** What went out: "data@offset+length" and "zero@offset+length", in order. */
    private final List<String> out = new ArrayList<>();

    private DeltaChunks delta(List<BlockRange> changed, long from, long size) {
        return new DeltaChunks(changed, from, size, new DeltaChunks.Out() {
            @Override
            public void data(long offset, ByteBuffer data) {
                out.add("data@" + offset + "+" + data.remaining());
            }

            @Override
            public void zero(long offset, long length) {
                out.add("zero@" + offset + "+" + length);
            }
        });
    }

    /** {@code blocks} blocks, each non-zero unless its index is in {@code zeros}. */
    private static ByteBuffer blocks(int blocks, int... zeros) {
        ByteBuffer data = ByteBuffer.allocate(blocks * BLOCK);
        for (int i = 0; i < blocks; i++) {
            final int index = i;
            if (Arrays.stream(zeros).noneMatch(z -> z == index)) {
                data.put(i * BLOCK, (byte) 1);
            }
        }
        return data;
    }

    @Test
    void dataInTheChangedRangesIsSentAndWhatReadsZerosThereIsAZeroRange() throws Exception {
        // Changed: blocks 2-5 and 10-13 and 20-23; the read has data in blocks 0-7 (block 4 zero) and 12-13; nothing after.
        DeltaChunks delta = delta(List.of(new BlockRange(2L * BLOCK, 4L * BLOCK), new BlockRange(10L * BLOCK, 4L * BLOCK),
                new BlockRange(20L * BLOCK, 4L * BLOCK)), 0, 32L * BLOCK);
        delta.accept(0, blocks(8, 4));
        delta.accept(12L * BLOCK, blocks(2));
        delta.finish();
        assertEquals(List.of("data@" + 2 * BLOCK + "+" + 2 * BLOCK, "zero@" + 4 * BLOCK + "+" + BLOCK, "data@" + 5 * BLOCK + "+" + BLOCK,
                "zero@" + 10 * BLOCK + "+" + 2 * BLOCK, "data@" + 12 * BLOCK + "+" + 2 * BLOCK, "zero@" + 20 * BLOCK + "+" + 4 * BLOCK), out);
    }

    @Test
    void adjacentZerosAreOneRangeAndNothingOutsideTheChangedRangesGoesOut() throws Exception {
        DeltaChunks delta = delta(List.of(new BlockRange(0, 8L * BLOCK)), 0, 64L * BLOCK);
        delta.accept(2L * BLOCK, blocks(4, 0, 1)); // blocks 2 and 3 zero, 4 and 5 data
        delta.accept(40L * BLOCK, blocks(4)); // outside
        delta.finish();
        assertEquals(List.of("zero@0+" + 4 * BLOCK, "data@" + 4 * BLOCK + "+" + 2 * BLOCK, "zero@" + 6 * BLOCK + "+" + 2 * BLOCK), out);
    }

    @Test
    void aResumedStreamLeavesOutWhatLiesBeforeItsStart() throws Exception {
        DeltaChunks delta = delta(List.of(new BlockRange(0, 4L * BLOCK), new BlockRange(8L * BLOCK, 8L * BLOCK)), 10L * BLOCK, 16L * BLOCK);
        delta.accept(12L * BLOCK, blocks(2));
        delta.finish();
        assertEquals(List.of("zero@" + 10 * BLOCK + "+" + 2 * BLOCK, "data@" + 12 * BLOCK + "+" + 2 * BLOCK,
                "zero@" + 14 * BLOCK + "+" + 2 * BLOCK), out);
    }

    @Test
    void noChangedRangesSendNothing() throws Exception {
        DeltaChunks delta = delta(List.of(), 0, 16L * BLOCK);
        delta.accept(0, blocks(16));
        delta.finish();
        assertEquals(List.of(), out);
    }
}
