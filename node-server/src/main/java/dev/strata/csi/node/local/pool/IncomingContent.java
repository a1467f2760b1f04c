package dev.strata.csi.node.local.pool;

import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageContent;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A RECEIVING volume's storage, open for one stream of content from another node: an image file
 * or a logical volume's device. The stream leaves zero blocks out; where the storage reads as
 * zeros wherever nothing was written (an image file, a thin logical volume in a pool that zeroes
 * new chunks) they stay unwritten, so a sparse source stays sparse; elsewhere ({@code zeroesGaps}:
 * a linear volume, a thin pool that does not zero) every byte the stream leaves out is written as
 * zeros, so that no other volume's old data is ever read through the copy. Writes come in
 * ascending order; {@link #sync} may run on another thread beside them.
 *
 * <p>A snapshot copy built on a base ({@code onBase}) starts as the base's content, and its
 * stream holds only what changed: what it leaves out is the base's, not zeros, so nothing is
 * written there; its data is written whole (a zero block in it replaces the base's data) and
 * its zero ranges are made to read as zeros ({@link #zero}), as holes where the storage can.
 */
public final class IncomingContent implements AutoCloseable {

    /** The digest of the content as it is on disk, read back. */
    @FunctionalInterface
    interface Digest {
        byte[] of(Path storage) throws IOException;
    }

    /** What closing does besides closing the file: deactivating a logical volume activated for the stream. */
    @FunctionalInterface
    interface Release {
        void run() throws IOException, DeviceException;
    }

    /** Makes a range read as zeros: a hole punched in a file, a thin volume's range discarded. */
    @FunctionalInterface
    interface Zeroing {
        void zero(FileChannel file, long offset, long length) throws IOException;
    }

    /** Zeros written: storage without holes. */
    static final Zeroing WRITE_ZEROS = (file, offset, length) -> ImageContent.writeZeros(file, offset, offset + length);

    private final Path storage;
    private final FileChannel file;
    private final boolean onBase;
    private final Zeroing zeroing;
    private final long capacityBytes;
    private final boolean zeroesGaps;
    private final Digest digest;
    private final Release release;

    IncomingContent(Path storage, long capacityBytes, boolean zeroesGaps, Digest digest, Release release) throws IOException {
        this(storage, capacityBytes, zeroesGaps, false, WRITE_ZEROS, digest, release);
    }

    IncomingContent(Path storage, long capacityBytes, boolean zeroesGaps, boolean onBase, Zeroing zeroing, Digest digest, Release release)
            throws IOException {
        this.storage = storage;
        this.onBase = onBase;
        this.zeroing = zeroing;
        this.capacityBytes = capacityBytes;
        this.zeroesGaps = zeroesGaps;
        this.digest = digest;
        this.release = release;
        this.file = FileChannel.open(storage, StandardOpenOption.READ, StandardOpenOption.WRITE); // read: a zero range is read back
    }

    /**
     * Writes {@code data} at {@code offset}; everything from {@code gapFrom} (where the stream's
     * previous chunk ended, or where it started) to {@code offset} holds zeros.
     */
    public void write(long gapFrom, long offset, ByteBuffer data) throws IOException {
        if (onBase) {
            ImageContent.writeWhole(file, offset, data);
        } else if (zeroesGaps) {
            ImageContent.writeZeros(file, gapFrom, offset);
            ImageContent.writeWhole(file, offset, data);
        } else {
            ImageContent.write(file, offset, data);
        }
    }

    /** Makes {@code length} bytes at {@code offset} read as zeros: a range the source reads as zeros, in a stream on a base. */
    public void zero(long offset, long length) throws IOException {
        zeroing.zero(file, offset, length);
    }

    /** Whether the storage started as a base's content: the stream holds only what changed since. */
    public boolean onBase() {
        return onBase;
    }

    /** Syncs what is written so far. */
    public void sync() throws IOException {
        file.force(false);
    }

    /** The content ended at {@code from}: zeros from there to the end, where they must be written, and all synced. */
    public void end(long from) throws IOException {
        if (zeroesGaps && !onBase) {
            ImageContent.writeZeros(file, from, capacityBytes);
        }
        file.force(true);
    }

    /** The digest of what is on disk, compared with the sender's. */
    public byte[] digest() throws IOException {
        return digest.of(storage);
    }

    /** Closes the file, then releases the storage (a logical volume is deactivated). */
    @Override
    public void close() throws IOException, DeviceException {
        try {
            file.close();
        } finally {
            release.run();
        }
    }
}
