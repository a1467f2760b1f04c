package dev.strata.csi.node.local.blocks;

/**
 * Where a {@link ChangedBlocks} engine sends its ranges, in ascending order and never overlapping.
 * A sink stops the work by throwing (the caller went away): the engine reads nothing more.
 */
public interface RangeSink {

    void accept(BlockRange range) throws InterruptedException;

    /**
     * Bytes of snapshot data the engine read to tell (where the pool's metadata could not): the
     * answer's cost. Called between reads: a sink whose caller went away throws here too.
     */
    default void read(long bytes) throws InterruptedException { }
}
