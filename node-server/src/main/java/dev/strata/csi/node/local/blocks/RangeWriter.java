package dev.strata.csi.node.local.blocks;

/**
 * Merges the ranges an engine finds, in ascending order, into as few as cover them (adjacent ones
 * joined), cut to {@code [from, limit)}, and hands each to the sink once it can grow no more.
 */
public final class RangeWriter {

    private final RangeSink sink;
    private final long from;
    private final long limit;
    private long pendingStart = -1;
    private long pendingEnd = -1;

    public RangeWriter(RangeSink sink, long from, long limit) {
        this.sink = sink;
        this.from = from;
        this.limit = limit;
    }

    /** The range {@code [start, end)}; it must not begin before the previous one's start. */
    public void add(long start, long end) throws InterruptedException {
        long cutStart = Math.max(start, from);
        long cutEnd = Math.min(end, limit);
        if (cutEnd <= cutStart) {
            return;
        }
        if (pendingEnd >= cutStart && pendingStart >= 0) {
            pendingEnd = Math.max(pendingEnd, cutEnd);
            return;
        }
        flush();
        pendingStart = cutStart;
        pendingEnd = cutEnd;
    }

    /** Sends what is pending: call once at the end. */
    public void finish() throws InterruptedException {
        flush();
    }

    public RangeSink sink() {
        return sink;
    }

    private void flush() throws InterruptedException {
        if (pendingStart >= 0) {
            sink.accept(new BlockRange(pendingStart, pendingEnd - pendingStart));
            pendingStart = -1;
            pendingEnd = -1;
        }
    }
}
