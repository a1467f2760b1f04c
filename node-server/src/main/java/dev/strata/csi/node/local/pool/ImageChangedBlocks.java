package dev.strata.csi.node.local.pool;

import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.linux.Kernel.DataRange;
import dev.strata.csi.node.local.blocks.ChangedBlocks;
import dev.strata.csi.node.local.blocks.ExtentComparison;
import dev.strata.csi.node.local.blocks.RangeSink;
import dev.strata.csi.node.local.blocks.RangeWriter;
import dev.strata.csi.node.local.image.ImageFiles;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;

/**
 * The image pool's changed-block engine, on its snapshots' files. Allocated: the file's data
 * ranges (SEEK_DATA, SEEK_HOLE). Changed: the two files' extent maps compared
 * ({@link ExtentComparison}); where they cannot tell, both files are read there and compared
 * {@value #BLOCK} bytes at a time, so that a range reported is {@value #BLOCK}-byte aligned.
 */
final class ImageChangedBlocks implements ChangedBlocks {

    /** The granularity of a comparison by reading, and of starting offsets. */
    static final int BLOCK = 4096;
    private static final int READ_BYTES = 1 << 20;

    private final PoolSnapshots snapshots;
    private final ImageFiles files;

    ImageChangedBlocks(PoolSnapshots snapshots, ImageFiles files) {
        this.snapshots = snapshots;
        this.files = files;
    }

    @Override
    public void allocated(SnapshotRecord snapshot, long from, RangeSink sink) throws IOException, InterruptedException {
        RangeWriter out = new RangeWriter(sink, aligned(from), snapshot.getCapacityBytes());
        for (DataRange range : files.dataRanges(snapshots.path(snapshot.getName()))) {
            out.add(range.offset(), range.offset() + range.length());
        }
        out.finish();
    }

    @Override
    public void changed(SnapshotRecord base, SnapshotRecord target, long from, RangeSink sink) throws IOException, InterruptedException {
        Path baseFile = snapshots.path(base.getName());
        Path targetFile = snapshots.path(target.getName());
        long size = target.getCapacityBytes();
        RangeWriter out = new RangeWriter(sink, aligned(from), size);
        var pieces = ExtentComparison.compare(files.extents(baseFile), files.extents(targetFile), aligned(from), size);
        try (FileChannel baseData = FileChannel.open(baseFile, StandardOpenOption.READ);
                FileChannel targetData = FileChannel.open(targetFile, StandardOpenOption.READ)) {
            ByteBuffer left = ByteBuffer.allocate(READ_BYTES);
            ByteBuffer right = ByteBuffer.allocate(READ_BYTES);
            for (ExtentComparison.Piece piece : pieces) {
                switch (piece.verdict()) {
                    case SAME -> { }
                    case DIFFERENT -> out.add(piece.start(), piece.end());
                    case READ -> compare(baseData, targetData, piece, left, right, out);
                }
            }
        }
        out.finish();
    }

    /** Reads the piece from both files and reports the blocks that differ. */
    private static void compare(FileChannel base, FileChannel target, ExtentComparison.Piece piece, ByteBuffer left, ByteBuffer right,
            RangeWriter out) throws IOException, InterruptedException {
        for (long at = piece.start(); at < piece.end(); at += READ_BYTES) {
            int length = (int) Math.min(READ_BYTES, piece.end() - at);
            fill(base, left, at, length);
            fill(target, right, at, length);
            out.sink().read((piece.baseData() ? length : 0) + (piece.targetData() ? length : 0));
            for (int block = 0; block < length; block += BLOCK) {
                int end = Math.min(length, block + BLOCK);
                if (Arrays.mismatch(left.array(), block, end, right.array(), block, end) >= 0) {
                    out.add(at + block, at + end);
                }
            }
        }
    }

    /** {@code length} bytes at {@code offset}; past the file's end (a base smaller than its target) zeros. */
    private static void fill(FileChannel file, ByteBuffer buffer, long offset, int length) throws IOException {
        buffer.clear().limit(length);
        while (buffer.hasRemaining()) {
            if (file.read(buffer, offset + buffer.position()) < 0) {
                break;
            }
        }
        Arrays.fill(buffer.array(), buffer.position(), length, (byte) 0);
    }

    static long aligned(long offset) {
        return offset - offset % BLOCK;
    }
}
