package dev.strata.csi.node.local.image;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.Kernel.DataRange;
import dev.strata.csi.linux.Kernel.Extent;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * An in-memory stand-in for {@link SystemImageFiles}, for unit tests without root: image files
 * are real sparse files (in a temporary directory), so their paths, sizes and identities are the
 * kernel's, on a pool filesystem of a size the test chooses, whose space is counted here: what a
 * file has allocated (all of it when made FULL, what the test says was {@link #written} when
 * SPARSE) is taken from the free space, so the arithmetic is exact. A copy is as large as its
 * source and carries the first block of its content (a filesystem's signature, see
 * {@code InMemoryFilesystems}); a plain copy takes as much space as its source allocated, a
 * reflink ({@link #copyBy}) none, though it reports the source's blocks as its own (stat counts
 * shared extents). As the real one, create and a FULL growth fail with ENOSPC when the blocks are
 * not free, and nothing is ever shrunk.
 *
 * <p>Where it differs: only the first block of content is kept in a copy, data ranges are one
 * range of the allocated bytes, and a file removed while a loop device holds it gives back its
 * space at once. {@link #failNext} fails the next call of one kind before it acts;
 * {@link #slowSpace} makes each space check take a while, as statvfs on a busy node can.
 */
public final class InMemoryImageFiles implements ImageFiles {

    /** What a copy keeps of its source's content: enough for every signature the tests write. */
    private static final int CONTENT_BYTES = 4096;

    private final long totalBytes;
    /** Bytes each file takes from the pool's free space. */
    private final Map<Path, Long> allocated = new ConcurrentHashMap<>();
    /** Bytes each reflinked file shares with its source: reported as its own, taken from no one. */
    private final Map<Path, Long> shared = new ConcurrentHashMap<>();
    private final Set<String> failNext = ConcurrentHashMap.newKeySet();
    private volatile CopyMethod copyMethod = CopyMethod.SPARSE_COPY;
    private volatile long spaceCheckMillis;

    /** Image files on a pool filesystem of {@code totalBytes}. */
    public InMemoryImageFiles(long totalBytes) {
        this.totalBytes = totalBytes;
    }

    /** Copies are made {@code method}: REFLINK as on xfs with reflink or btrfs, SPARSE_COPY as on ext4. */
    InMemoryImageFiles copyBy(CopyMethod method) {
        copyMethod = method;
        return this;
    }

    /** Each space check takes {@code millis}. */
    public InMemoryImageFiles slowSpace(long millis) {
        spaceCheckMillis = millis;
        return this;
    }

    /** The next call of {@code call} (create, grow, copy or space) fails before it acts, as with ENOSPC. */
    public void failNext(String call) {
        failNext.add(call);
    }

    /** The sparse {@code image} has {@code bytes} allocated now: what its volume's writers wrote (or a trim gave back). */
    public synchronized void allocated(Path image, long bytes) throws IOException {
        allocated.put(key(image), Math.min(bytes, Files.size(image)));
    }

    @Override
    public synchronized void create(Path image, long bytes, Allocation allocation) throws IOException {
        fail("create", "create " + image);
        long taking = allocation == Allocation.FULL ? bytes : 0;
        requireFree(image, taking - had(image));
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
            file.setLength(0); // a leftover of an interrupted create is replaced
            file.setLength(bytes);
        }
        shared.remove(key(image));
        allocated.put(key(image), taking);
    }

    @Override
    public synchronized void grow(Path image, long bytes, Allocation allocation) throws IOException {
        fail("grow", "grow " + image);
        long size = Files.size(image);
        if (size >= bytes) {
            return;
        }
        if (allocation == Allocation.FULL) {
            requireFree(image, bytes - size);
            allocated.merge(key(image), bytes - size, Long::sum);
        }
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
            file.setLength(bytes);
        }
    }

    @Override
    public synchronized CopyMethod copy(Path source, Path target) throws IOException {
        fail("copy", "copy " + source + " to " + target);
        long sourceAllocated = allocatedBytes(source);
        if (copyMethod == CopyMethod.SPARSE_COPY) {
            requireFree(target, sourceAllocated - had(target));
        }
        ByteBuffer content = ByteBuffer.allocate(CONTENT_BYTES);
        try (FileChannel from = FileChannel.open(source);
                FileChannel to = FileChannel.open(target, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                        StandardOpenOption.TRUNCATE_EXISTING)) {
            from.read(content, 0);
            content.flip();
            to.write(content, 0);
            if (to.size() < from.size()) {
                to.write(ByteBuffer.allocate(1), from.size() - 1); // the rest a hole, as large as the source
            }
        }
        if (copyMethod == CopyMethod.REFLINK) {
            allocated.put(key(target), 0L);
            shared.put(key(target), sourceAllocated);
        } else {
            allocated.put(key(target), sourceAllocated);
            shared.remove(key(target));
        }
        return copyMethod;
    }

    /** Zeros written over the range, as on a filesystem without holes; the accounting keeps what it had. */
    @Override
    public void punchHole(Path image, long offset, long length) throws IOException {
        try (FileChannel file = FileChannel.open(image, StandardOpenOption.WRITE)) {
            ImageContent.writeZeros(file, offset, offset + length);
        }
    }

    @Override
    public void sync(Path image) {
        // the files are the test's scratch: nothing to make durable
    }

    @Override
    public List<DataRange> dataRanges(Path image) throws IOException {
        long bytes = allocatedBytes(image);
        return bytes == 0 ? List.of() : List.of(new DataRange(0, bytes));
    }

    /**
     * One extent over the whole file, at no known place: it tells nothing of sharing or holes (a
     * test may write the file directly, past the stand-in's accounting), so the caller reads.
     */
    @Override
    public List<Extent> extents(Path image) throws IOException {
        long size = Files.size(image);
        return size == 0 ? List.of() : List.of(new Extent(0, 0, size, Extent.UNKNOWN | Extent.LAST));
    }

    @Override
    public long sizeBytes(Path image) throws IOException {
        return Files.size(image);
    }

    @Override
    public synchronized long allocatedBytes(Path image) throws IOException {
        if (!Files.exists(image)) {
            throw new NoSuchFileException(image.toString());
        }
        return allocated.getOrDefault(key(image), 0L) + shared.getOrDefault(key(image), 0L);
    }

    @Override
    public Space space(Path dir) throws IOException {
        fail("space", "statvfs " + dir);
        if (spaceCheckMillis > 0) {
            try {
                Thread.sleep(spaceCheckMillis);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        synchronized (this) {
            return new Space(totalBytes, totalBytes - taken());
        }
    }

    /** Bytes the files that still exist take from the pool. */
    private long taken() {
        allocated.keySet().removeIf(path -> !Files.exists(path));
        shared.keySet().removeIf(path -> !Files.exists(path));
        return allocated.values().stream().mapToLong(Long::longValue).sum();
    }

    /** What the file at {@code image} takes now: what it replaces gives that back. */
    private long had(Path image) {
        return Files.exists(image) ? allocated.getOrDefault(key(image), 0L) : 0;
    }

    private void requireFree(Path image, long bytes) throws IOException {
        if (bytes > totalBytes - taken()) {
            throw new IOException("fallocate " + image + ": No space left on device");
        }
    }

    private static Path key(Path image) {
        return image.toAbsolutePath().normalize();
    }

    private void fail(String call, String what) throws IOException {
        if (failNext.remove(call)) {
            throw new IOException(what + ": No space left on device (injected failure of " + call + ")");
        }
    }
}
