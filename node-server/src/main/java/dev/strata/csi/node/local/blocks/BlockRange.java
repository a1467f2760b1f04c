package dev.strata.csi.node.local.blocks;

/** A byte range of a volume or snapshot: {@code length} bytes at {@code offset}. */
public record BlockRange(long offset, long length) {

    public BlockRange {
        if (offset < 0 || length <= 0) {
            throw new IllegalArgumentException("no range of " + length + " bytes at " + offset);
        }
    }

    public long end() {
        return offset + length;
    }
}
