package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import dev.strata.csi.agent.api.ContentStart;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.node.local.blocks.BlockRange;
import dev.strata.csi.node.local.blocks.DeltaChunks;
import dev.strata.csi.node.local.image.ImageContent;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * A snapshot copy's stream between two pools in one test, as ReadContent sends it and
 * WriteSnapshotCopy writes it, without the wire: the content read whole from {@code from} on
 * (digested as it is read), cut to {@code changed} on a base ({@link DeltaChunks}), each data
 * chunk or zero range written into the RECEIVING copy after the previous one, then the copy's
 * digest compared with the sender's and the copy finished. {@code cutAt}: the stream stops at the
 * first piece at or past it, with its progress recorded, as an interrupted one.
 */
final class CopyStream {

    /** What the copy's storage is written from: the sender's read of its content. */
    @FunctionalInterface
    interface Source {
        byte[] read(long from, ImageContent.Chunks chunks) throws Exception;
    }

    private CopyStream() {}

    /** Streams into copy {@code name} (RECEIVING); returns the finished copy, or null when cut short. */
    static Snapshot stream(SnapshotCopies copies, String name, Source source, long sizeBytes, List<BlockRange> changed, String tag, long cutAt)
            throws Exception {
        Receiving target = copies.target(name);
        Receiving.Progress progress = target.progress();
        long from = progress.tag().equals(tag) ? progress.receivedBytes() : 0;
        if (!progress.tag().equals(tag)) {
            target.restart(tag);
        }
        long[] position = {from};
        boolean[] cut = {false};
        try (IncomingContent content = target.open()) {
            DeltaChunks.Out out = new DeltaChunks.Out() {
                @Override
                public void data(long offset, ByteBuffer data) throws java.io.IOException {
                    if (cut[0] || offset >= cutAt) {
                        cut[0] = true;
                        return;
                    }
                    content.write(position[0], offset, data);
                    position[0] = offset + data.remaining();
                }

                @Override
                public void zero(long offset, long length) throws java.io.IOException {
                    if (cut[0] || offset >= cutAt) {
                        cut[0] = true;
                        return;
                    }
                    content.zero(offset, length);
                    position[0] = offset + length;
                }
            };
            byte[] digest;
            if (content.onBase()) {
                DeltaChunks delta = new DeltaChunks(changed, from, sizeBytes, out);
                digest = source.read(from, delta);
                delta.finish();
            } else {
                digest = source.read(from, out::data);
            }
            if (cut[0]) {
                content.sync();
                target.receivedUpTo(position[0]);
                return null;
            }
            content.end(position[0]);
            assertArrayEquals(digest, content.digest(), "the digest of what is on disk is the sender's");
        }
        return copies.finish(name, ContentStart.newBuilder().setTag(tag).setSizeBytes(sizeBytes).setFilesystem("ext4").build());
    }
}
