package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.fs.SystemFilesystemFreezer;
import dev.strata.csi.node.local.image.InMemoryImageFiles;
import dev.strata.csi.node.local.image.InMemoryLoopDevices;
import dev.strata.csi.node.mount.InMemoryMounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
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
    private final InMemoryMounter mounter = new InMemoryMounter();

    private ImagePool pool(long total, long spaceCheckMillis) throws Exception {
        return pool(total, spaceCheckMillis, Clock.systemUTC());
    }

    private ImagePool pool(long total, long spaceCheckMillis, Clock clock) throws Exception {
        return pool(new InMemoryImageFiles(total).slowSpace(spaceCheckMillis), clock);
    }

    private ImagePool pool(InMemoryImageFiles files, Clock clock) throws Exception {
        ImagePool pool = new ImagePool(dir, files, new InMemoryLoopDevices(mounter), mounter, new SystemFilesystemFreezer(new dev.strata.csi.linux.Kernel()), Crashes.none(), clock,
                new Log(new PrintStream(PrintStream.nullOutputStream()), 0));
        pool.reconcile();
        return pool;
    }

    @Test
    void sparseImagesReserveTheirWholeSize() throws Exception {
        ImagePool pool = pool(10 * GIB, 0);
        PlainVolumes.create(pool, "pvc-a", 6 * GIB, Allocation.SPARSE, Optional.empty());
        assertEquals(4 * GIB, pool.status().getAvailableBytes(), "a sparse image can still be filled");
        CsiException full = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-b", 5 * GIB, Allocation.SPARSE, Optional.empty()));
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
                        PlainVolumes.create(pool, name, 8 * GIB, Allocation.SPARSE, Optional.empty());
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

    /**
     * A snapshot's copy takes what its image has written; it is admitted against the same room as
     * the images, and once taken as a plain copy its blocks are out of the free space.
     */
    @Test
    void aSnapshotIsAdmittedAgainstThePoolsRoom() throws Exception {
        InMemoryImageFiles files = new InMemoryImageFiles(10 * GIB);
        ImagePool pool = pool(files, Clock.systemUTC());
        PlainVolumes.create(pool, "pvc-a", 6 * GIB, Allocation.SPARSE, Optional.empty());
        files.allocated(pool.imagePath("pvc-a"), 5 * GIB);
        assertEquals(4 * GIB, pool.status().getAvailableBytes(), "5 GiB free, 1 GiB of them the image may still take");
        CsiException full = assertThrows(CsiException.class, () -> pool.snapshots().take("snap-a", "pvc-a", false));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, full.code());
        assertTrue(full.getMessage().endsWith("bytes available; a snapshot of volume pvc-a needs " + 5 * GIB), full.getMessage());
        assertEquals(List.of(), pool.snapshots().list());
        assertEquals(List.of("pvc-a.img", "pvc-a.record"), files());

        files.allocated(pool.imagePath("pvc-a"), 2 * GIB);
        pool.snapshots().take("snap-a", "pvc-a", false);
        assertEquals(List.of("snap-a"), pool.snapshots().list().stream().map(dev.strata.csi.agent.api.Snapshot::getName).toList());
        assertEquals(2 * GIB, pool.status().getAvailableBytes(), "10 GiB less the image's 2 written and 4 to come, less the copy's 2");
        CsiException noRoom = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-b", 3 * GIB, Allocation.SPARSE, Optional.empty()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, noRoom.code());
    }

    private static final Duration EXPIRY = Duration.ofHours(1);
    private static final ContentSource ELSEWHERE = ContentSource.newBuilder().setVolume("pvc-elsewhere").build();

    /** A copy's source is kept in the image's record: a name no snapshot or volume can have is refused, not recorded. */
    @Test
    void aCopyFromASourceNoNodeCanHaveIsRefused() throws Exception {
        ImagePool pool = pool(10 * GIB, 0, new MovingClock());
        for (ContentSource source : List.of(ContentSource.newBuilder().setVolume("x".repeat(100_000)).build(),
                ContentSource.newBuilder().setSnapshot("../pvc-a").build())) {
            CsiException refused = assertThrows(CsiException.class, () -> pool.incoming().receive("pvc-copy", GIB, Allocation.SPARSE, source, false, 1));
            assertEquals(Status.Code.INVALID_ARGUMENT, refused.code(), refused.getMessage());
            assertEquals(Optional.empty(), pool.get("pvc-copy"));
            assertEquals(10 * GIB, pool.status().getAvailableBytes());
        }
    }

    /** Each transfer step (ReceiveVolume, a checkpoint, a start over) counts the idle time from zero again. */
    @Test
    void aCopyIdleForTheExpiryIsRemovedAndItsCapacityGivenBack() throws Exception {
        MovingClock clock = new MovingClock();
        ImagePool pool = pool(10 * GIB, 0, clock);
        PlainVolumes.create(pool, "pvc-ready", GIB, Allocation.SPARSE, Optional.empty());
        pool.incoming().receive("pvc-copy", 6 * GIB, Allocation.SPARSE, ELSEWHERE, false, 1);
        assertEquals(3 * GIB, pool.status().getAvailableBytes(), "the partial image reserves its capacity");

        clock.advance(EXPIRY.minusMinutes(1));
        pool.incoming().receivedUpTo("pvc-copy", 64L << 20); // a checkpoint
        clock.advance(EXPIRY.minusMinutes(1));
        assertFalse(pool.incoming().removeIfAbandoned("pvc-copy", EXPIRY), "59 minutes since the checkpoint");
        pool.incoming().receive("pvc-copy", 6 * GIB, Allocation.SPARSE, ELSEWHERE, false, 1); // the retried CreateVolume asks again
        clock.advance(EXPIRY.minusMinutes(1));
        assertFalse(pool.incoming().removeIfAbandoned("pvc-copy", EXPIRY), "59 minutes since ReceiveVolume");
        pool.incoming().restart("pvc-copy", "other content");
        clock.advance(EXPIRY.minusSeconds(1));
        assertFalse(pool.incoming().removeIfAbandoned("pvc-copy", EXPIRY), "a second short of an hour since the start over");
        assertEquals(List.of("pvc-copy"), pool.incoming().names());

        clock.advance(Duration.ofSeconds(1));
        assertTrue(pool.incoming().removeIfAbandoned("pvc-copy", EXPIRY));
        assertEquals(9 * GIB, pool.status().getAvailableBytes(), "its capacity is free again");
        assertEquals(List.of("pvc-ready.img", "pvc-ready.record"), files());
        assertEquals(List.of(), pool.incoming().names());
        assertFalse(pool.incoming().removeIfAbandoned("pvc-copy", EXPIRY), "gone already");
        clock.advance(EXPIRY.multipliedBy(10));
        assertFalse(pool.incoming().removeIfAbandoned("pvc-ready", EXPIRY), "a READY volume is never an abandoned copy");
        assertTrue(pool.exists("pvc-ready"));
    }

    private List<String> files() throws IOException {
        try (var listing = Files.list(dir)) {
            return listing.map(f -> f.getFileName().toString()).filter(name -> !name.startsWith(".")).sorted().toList();
        }
    }
}
