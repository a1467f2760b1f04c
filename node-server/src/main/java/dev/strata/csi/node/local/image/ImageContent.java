package dev.strata.csi.node.local.image;

import dev.strata.csi.linux.Kernel.DataRange;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.List;
import java.util.zip.CRC32;
import java.util.zip.CRC32C;

/**
 * An image's content as a transfer to another node carries it: its data in chunks at their
 * offsets, in ascending order, holes and all-zero blocks left out (so a sparse image arrives
 * sparse), and a digest of what the content is, whatever is allocated on either side: SHA-256 of
 * each non-zero 4 KiB block's index and checksums ({@link #blockSum}). The sender digests the source as it reads it;
 * the receiver digests its image as synced on its disk, so the comparison covers the whole way.
 */
public final class ImageContent {

    /** The unit of the digest and of skipping zeros; the filesystems' block size. */
    public static final int BLOCK = 4096;
    /** Data per chunk: small against gRPC's 4 MiB message limit, large enough to keep calls few. */
    public static final int CHUNK = 1 << 20;

    private static final byte[] ZEROS = new byte[BLOCK];
    private static final ByteBuffer ZERO_BLOCK = ByteBuffer.wrap(ZEROS).asReadOnlyBuffer();

    /** Where a read's chunks go. */
    @FunctionalInterface
    public interface Chunks {
        /** {@code data} (its position to its limit) belongs at {@code offset}; it is not used after the call returns. */
        void accept(long offset, ByteBuffer data) throws IOException, InterruptedException;
    }

    private final ImageFiles files;

    public ImageContent(ImageFiles files) {
        this.files = files;
    }

    /**
     * Reads {@code image} from its start: every data block goes into the returned digest, and the
     * chunks that start at or after {@code from} (a chunk that spans it, from {@code from} on) go
     * to {@code chunks}. A chunk starts and ends on non-zero blocks; it may hold zero blocks within.
     */
    public byte[] read(Path image, long from, Chunks chunks) throws IOException, InterruptedException {
        return read(image, files.dataRanges(image), from, chunks);
    }

    /**
     * As {@link #read(Path, long, Chunks)}, for a block device (a logical volume) of
     * {@code sizeBytes}: a device has no holes to skip, so every block is read, and its zero blocks
     * are left out as an image's are: the digest is the one an image with the same content has.
     */
    public static byte[] readDevice(Path device, long sizeBytes, long from, Chunks chunks) throws IOException, InterruptedException {
        return read(device, List.of(new DataRange(0, sizeBytes)), from, chunks);
    }

    /** The digest of the first {@code sizeBytes} of {@code device} as it is on disk. */
    public static byte[] digestDevice(Path device, long sizeBytes) throws IOException {
        return digest(device, () -> readDevice(device, sizeBytes, Long.MAX_VALUE, (offset, data) -> { }));
    }

    private static byte[] read(Path image, List<DataRange> ranges, long from, Chunks chunks) throws IOException, InterruptedException {
        MessageDigest digest = sha256();
        byte[] buffer = new byte[CHUNK];
        ByteBuffer index = ByteBuffer.allocate(Long.BYTES + 2 * Integer.BYTES);
        long next = 0; // ranges of a filesystem with smaller blocks may share a 4 KiB block: each is read once
        try (FileChannel file = FileChannel.open(image, StandardOpenOption.READ)) {
            for (DataRange range : ranges) {
                long end = range.offset() + range.length();
                long offset = Math.max(next, Math.floorDiv(range.offset(), BLOCK) * (long) BLOCK);
                while (offset < end) {
                    int length = (int) Math.min(CHUNK, Math.ceilDiv(end, BLOCK) * (long) BLOCK - offset);
                    readFully(file, ByteBuffer.wrap(buffer, 0, length), offset);
                    int first = -1;
                    int last = -1;
                    for (int block = 0; block < length; block += BLOCK) {
                        int size = Math.min(BLOCK, length - block);
                        if (!zero(buffer, block, size)) {
                            digest.update(blockSum(index, (offset + block) / BLOCK, buffer, block, size));
                            first = first < 0 ? block : first;
                            last = block + size;
                        }
                    }
                    if (first >= 0 && offset + last > from) {
                        int start = (int) Math.max(first, Math.min(last, from - offset));
                        chunks.accept(offset + start, ByteBuffer.wrap(buffer, start, last - start));
                    }
                    offset += length;
                }
                next = Math.max(next, Math.ceilDiv(end, BLOCK) * (long) BLOCK);
            }
        }
        return digest.digest();
    }

    /** The digest of {@code image}'s content as it is on disk. */
    public byte[] digest(Path image) throws IOException {
        return digest(image, () -> read(image, Long.MAX_VALUE, (offset, data) -> { }));
    }

    /** A whole read, whose digest is all that is wanted. */
    @FunctionalInterface
    private interface WholeRead {
        byte[] run() throws IOException, InterruptedException;
    }

    private static byte[] digest(Path read, WholeRead whole) throws IOException {
        try {
            return whole.run();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while reading " + read, e);
        }
    }

    /**
     * Writes {@code data} (its position to its limit, which it leaves where they are) at
     * {@code offset}, leaving its zero blocks out: a hole stays a hole. Any buffer will do: a
     * received message's own read-only bytes are written without a copy of their own.
     */
    public static void write(FileChannel file, long offset, ByteBuffer data) throws IOException {
        ByteBuffer bytes = data.slice();
        int length = bytes.remaining();
        int run = -1;
        for (int block = 0; block <= length; block += BLOCK) {
            int size = Math.min(BLOCK, length - block);
            boolean nonZero = block < length && bytes.slice(block, size).mismatch(ZERO_BLOCK.slice(0, size)) >= 0;
            if (nonZero && run < 0) {
                run = block;
            } else if (!nonZero && run >= 0) {
                writeFully(file, bytes.slice(run, block - run), offset + run);
                run = -1;
            }
        }
        if (run >= 0) {
            writeFully(file, bytes.slice(run, length - run), offset + run);
        }
    }

    /** Writes {@code data} (its position to its limit, left where they are) at {@code offset} as it is, zero blocks too. */
    public static void writeWhole(FileChannel file, long offset, ByteBuffer data) throws IOException {
        writeFully(file, data.slice(), offset);
    }

    /** Writes zeros over {@code from} to {@code to}: storage that does not read as zeros where nothing was written. */
    public static void writeZeros(FileChannel file, long from, long to) throws IOException {
        ByteBuffer zeros = ByteBuffer.allocate((int) Math.min(CHUNK, Math.max(0, to - from)));
        for (long at = from; at < to; at += zeros.capacity()) {
            writeFully(file, zeros.clear().limit((int) Math.min(zeros.capacity(), to - at)), at);
        }
    }

    /** Writes zeros over the blocks from {@code from} to {@code to} that do not read as zeros; the others are left unwritten. */
    public static void zeroData(FileChannel file, long from, long to) throws IOException {
        byte[] buffer = new byte[CHUNK];
        for (long at = from; at < to; at += CHUNK) {
            int length = (int) Math.min(CHUNK, to - at);
            readFully(file, ByteBuffer.wrap(buffer, 0, length), at);
            for (int block = 0; block < length; block += BLOCK) {
                int size = Math.min(BLOCK, length - block);
                if (!zero(buffer, block, size)) {
                    writeFully(file, ZERO_BLOCK.slice(0, size), at + block);
                }
            }
        }
    }

    /**
     * What the digest takes of a non-zero block: its index, its CRC-32C and its CRC-32. Two
     * independent checksums of 32 bits per block, rather than the block itself: both are
     * instructions of the processor even in the servers' C1-only JVM (jvm.options), where SHA-256
     * over the data would run at a tenth of the disk's speed. The digest detects damage (a flipped
     * bit, a chunk lost or misplaced), not forgery: the agent channel is authenticated.
     */
    private static byte[] blockSum(ByteBuffer sum, long index, byte[] bytes, int from, int length) {
        CRC32C crc32c = new CRC32C();
        crc32c.update(bytes, from, length);
        CRC32 crc32 = new CRC32();
        crc32.update(bytes, from, length);
        return sum.clear().putLong(index).putInt((int) crc32c.getValue()).putInt((int) crc32.getValue()).array();
    }

    /** CRC-32C of the buffer's remaining bytes, which it leaves where they are. */
    public static int crc32c(ByteBuffer data) {
        CRC32C crc = new CRC32C();
        crc.update(data.duplicate());
        return (int) crc.getValue();
    }

    /** Whether {@code length} bytes of {@code bytes} at {@code from} (an index, regardless of its position) are all zero. */
    public static boolean isZero(ByteBuffer bytes, int from, int length) {
        return bytes.slice(from, length).mismatch(ZERO_BLOCK.slice(0, length)) < 0;
    }

    private static boolean zero(byte[] bytes, int from, int length) {
        return Arrays.mismatch(bytes, from, from + length, ZEROS, 0, length) < 0;
    }

    private static void readFully(FileChannel file, ByteBuffer buffer, long offset) throws IOException {
        while (buffer.hasRemaining()) {
            int read = file.read(buffer, offset + buffer.position());
            if (read < 0) { // the file ends sooner than its data ranges said: the rest reads as zeros
                Arrays.fill(buffer.array(), buffer.position(), buffer.limit(), (byte) 0);
                return;
            }
        }
    }

    private static void writeFully(FileChannel file, ByteBuffer buffer, long offset) throws IOException {
        long at = offset;
        while (buffer.hasRemaining()) {
            at += file.write(buffer, at);
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java runtime has SHA-256", e);
        }
    }
}
