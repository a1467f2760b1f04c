package dev.strata.csi.backend.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.Kernel.DataRange;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.io.IOException;
import java.io.PrintStream;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Capacity accounting of the pool, on a real directory with a pool filesystem of a size the test
 * chooses (the free space is the one thing that is made up here, so the arithmetic can be exact).
 */
class ImagePoolCapacityTest {

    private static final long GIB = 1L << 30;

    @TempDir
    Path dir;

    /** Image files as the real thing makes them (sparse), on a pool that holds {@code total} bytes. */
    private static final class SmallPool implements ImageFiles {
        private final long total;
        private final long spaceCheckMillis;

        SmallPool(long total, long spaceCheckMillis) {
            this.total = total;
            this.spaceCheckMillis = spaceCheckMillis;
        }

        @Override
        public void create(Path image, long bytes, Allocation allocation) throws IOException {
            try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
                file.setLength(bytes);
            }
        }

        @Override
        public void grow(Path image, long bytes, Allocation allocation) throws IOException {
            try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
                file.setLength(Math.max(file.length(), bytes));
            }
        }

        @Override
        public CopyMethod copy(Path source, Path target) {
            throw new UnsupportedOperationException("this pool only makes and grows images");
        }

        @Override
        public List<DataRange> dataRanges(Path image) {
            throw new UnsupportedOperationException("this pool only makes and grows images");
        }

        @Override
        public long sizeBytes(Path image) throws IOException {
            return java.nio.file.Files.size(image);
        }

        @Override
        public long allocatedBytes(Path image) {
            return 0; // nothing written yet
        }

        @Override
        public Space space(Path dir) {
            try {
                Thread.sleep(spaceCheckMillis); // statvfs and stat of every image take a while on a busy node
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return new Space(total, total);
        }
    }

    private static final LoopDevices NO_LOOPS = new LoopDevices() {
        @Override
        public LoopDevice attach(Path image) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void detach(Path device) {
            throw new UnsupportedOperationException();
        }

        @Override
        public Optional<LoopDevice> find(Path image) {
            return Optional.empty();
        }

        @Override
        public List<LoopDevice> list() {
            return List.of();
        }

        @Override
        public long sizeBytes(Path device) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void refreshCapacity(Path device) {
            throw new UnsupportedOperationException();
        }
    };

    private static final Mounter NO_MOUNTS = new Mounter() {
        @Override
        public void mount(String source, Path target, String fsType, List<String> options) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void bindMount(Path source, Path target, boolean readOnly) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void unmount(Path target) {
            throw new UnsupportedOperationException();
        }

        @Override
        public MountTable table() {
            return MountTable.parse("");
        }
    };

    private ImagePool pool(long total, long spaceCheckMillis) throws Exception {
        ImagePool pool = new ImagePool(dir, new SmallPool(total, spaceCheckMillis), NO_LOOPS, NO_MOUNTS, new SystemFilesystemFreezer(new dev.strata.csi.linux.Kernel()), Crashes.NONE,
                new Log(new PrintStream(PrintStream.nullOutputStream()), 0));
        pool.reconcile();
        return pool;
    }

    @Test
    void sparseImagesReserveTheirWholeSize() throws Exception {
        ImagePool pool = pool(10 * GIB, 0);
        pool.create("pvc-a", 6 * GIB, Allocation.SPARSE);
        assertEquals(4 * GIB, pool.status().getAvailableBytes(), "a sparse image can still be filled");
        CsiException full = assertThrows(CsiException.class, () -> pool.create("pvc-b", 5 * GIB, Allocation.SPARSE));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, full.code());
        assertEquals(List.of("pvc-a.img", "pvc-a.record"), files());
    }

    @Test
    void twoCreatesAtOnceCannotBothTakeTheLastSpace() throws Exception {
        ImagePool pool = pool(10 * GIB, 200);
        ExecutorService callers = Executors.newFixedThreadPool(2);
        List<Future<Status.Code>> calls = new ArrayList<>();
        try {
            for (String name : List.of("pvc-a", "pvc-b")) {
                calls.add(callers.submit(() -> {
                    try {
                        pool.create(name, 8 * GIB, Allocation.SPARSE);
                        return Status.Code.OK;
                    } catch (CsiException e) {
                        return e.code();
                    }
                }));
            }
            List<Status.Code> codes = new ArrayList<>();
            for (Future<Status.Code> call : calls) {
                codes.add(call.get());
            }
            codes.sort(null);
            assertEquals(List.of(Status.Code.OK, Status.Code.RESOURCE_EXHAUSTED), codes);
        } finally {
            callers.shutdownNow();
        }
        assertEquals(2 * GIB, pool.status().getAvailableBytes());
    }

    private List<String> files() throws IOException {
        try (var listing = Files.list(dir)) {
            return listing.map(f -> f.getFileName().toString()).filter(name -> !name.startsWith(".")).sorted().toList();
        }
    }
}
