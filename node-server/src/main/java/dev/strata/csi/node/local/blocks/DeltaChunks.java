package dev.strata.csi.node.local.blocks;

import dev.strata.csi.node.local.image.ImageContent;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * A whole read of a snapshot's content ({@link ImageContent}: its non-zero data, in ascending
 * chunks that may hold zero blocks within) cut down to the ranges that changed since a base, as
 * an incremental copy sends them: the non-zero blocks within those ranges as data, and what within
 * them reads zeros (the holes and zero blocks the read leaves out) as zero ranges, so that the
 * receiver, which starts from its copy of the base, punches them and holes stay holes. Everything
 * outside the changed ranges is left out: the receiver has it from its base. Data and zero
 * ranges go out in ascending order, never overlapping, on whole blocks; adjacent zero ranges
 * joined. Call {@link #finish} once the read is done.
 */
public final class DeltaChunks implements ImageContent.Chunks {

    /** Where the delta goes. */
    public interface Out {
        /** Non-zero data (its position to its limit) at {@code offset}; not used after the call returns. */
        void data(long offset, ByteBuffer data) throws IOException, InterruptedException;

        /** {@code length} bytes at {@code offset} read as zeros in the source. */
        void zero(long offset, long length) throws IOException, InterruptedException;
    }

    private static final int BLOCK = ImageContent.BLOCK;

    private final List<BlockRange> changed;
    private final long sizeBytes;
    private final Out out;
    /** The first changed range that may still reach past {@link #cursor}. */
    private int index;
    /** Everything below it is accounted for. */
    private long cursor;
    private long zeroStart = -1;
    private long zeroEnd = -1;

    /** {@code changed}: ascending, not overlapping; {@code from}: where a resumed stream starts (a block boundary). */
    public DeltaChunks(List<BlockRange> changed, long from, long sizeBytes, Out out) {
        this.changed = changed;
        this.sizeBytes = sizeBytes;
        this.out = out;
        this.cursor = from;
    }

    @Override
    public void accept(long offset, ByteBuffer data) throws IOException, InterruptedException {
        zeros(cursor, offset); // what the read skipped reads as zeros
        ByteBuffer bytes = data.slice();
        int length = bytes.remaining();
        int run = -1;
        for (int block = 0; block < length; block += BLOCK) {
            int size = Math.min(BLOCK, length - block);
            long at = offset + block;
            boolean inChanged = changes(at, at + size);
            boolean zero = ImageContent.isZero(bytes, block, size);
            if (inChanged && !zero) {
                if (run < 0) {
                    flushZeros();
                    run = block;
                }
                continue;
            }
            if (run >= 0) {
                out.data(offset + run, bytes.slice(run, block - run));
                run = -1;
            }
            if (inChanged) {
                addZeros(at, at + size);
            }
        }
        if (run >= 0) {
            out.data(offset + run, bytes.slice(run, length - run));
        }
        cursor = Math.max(cursor, offset + length);
    }

    /** The changed ranges past the last data read zeros: sent as zero ranges. */
    public void finish() throws IOException, InterruptedException {
        zeros(cursor, sizeBytes);
        flushZeros();
    }

    /** Whether a changed range overlaps {@code [start, end)}; ranges ending before it are passed for good. */
    private boolean changes(long start, long end) {
        while (index < changed.size() && changed.get(index).end() <= start) {
            index++;
        }
        return index < changed.size() && changed.get(index).offset() < end;
    }

    /** The changed ranges' parts within {@code [from, to)}, which read zeros. */
    private void zeros(long from, long to) throws IOException, InterruptedException {
        for (int i = index; i < changed.size() && changed.get(i).offset() < to; i++) {
            long start = Math.max(from, changed.get(i).offset());
            long end = Math.min(to, changed.get(i).end());
            if (start < end) {
                addZeros(start, end);
            }
        }
        changes(to, to);
    }

    private void addZeros(long start, long end) throws IOException, InterruptedException {
        if (zeroStart >= 0 && start <= zeroEnd) {
            zeroEnd = Math.max(zeroEnd, end);
            return;
        }
        flushZeros();
        zeroStart = start;
        zeroEnd = end;
    }

    private void flushZeros() throws IOException, InterruptedException {
        if (zeroStart >= 0) {
            out.zero(zeroStart, zeroEnd - zeroStart);
            zeroStart = -1;
            zeroEnd = -1;
        }
    }
}
