package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Timestamp;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.blocks.BlockRange;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.lvm.InMemoryLogicalVolumes;
import dev.strata.csi.node.local.lvm.InMemoryThinMappings;
import dev.strata.csi.node.mount.InMemoryMounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Snapshot copies kept in the LVM pool, on the in-memory stand-in for the lvm2 tools with each
 * volume's data in a file: a copy made RECEIVING (not listed), written whole, then a later one
 * built on it (a thin snapshot of the base copy) with only the changed ranges and zero ranges
 * written, byte for byte the source's; kept over a restart while RECEIVING and resumed; started
 * over from its base for other content; removed once abandoned; the names and bases it refuses.
 */
class SnapshotCopiesTest {

    private static final long MIB = 1L << 20;
    private static final long GIB = 1L << 30;
    private static final long SIZE = 8 * MIB;

    @TempDir
    Path dir;

    private InMemoryLogicalVolumes lvm;
    private final MovingClock clock = new MovingClock();
    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();

    @BeforeEach
    void volumeGroup() throws Exception {
        Files.createDirectories(dir.resolve("devices"));
        lvm = new InMemoryLogicalVolumes("vg-strata", 4 * GIB, "thinpool", 2 * GIB).devicesIn(dir.resolve("devices"));
    }

    private LvmPool pool() throws Exception {
        LvmPool pool = new LvmPool(dir.resolve("records"), lvm, new InMemoryThinMappings(), new InMemoryMounter(), Crashes.none(), clock,
                new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0));
        pool.reconcile();
        return pool;
    }

    private static Snapshot snapshot(String name, long seconds) {
        return Snapshot.newBuilder().setName(name).setSourceVolume("pvc-far").setCapacityBytes(SIZE)
                .setCreationTime(Timestamp.newBuilder().setSeconds(seconds)).addCopyNodes("node-b").build();
    }

    /** The source's content: {@code size} bytes, random data in the ranges given. */
    private static byte[] content(long seed, long[]... ranges) {
        byte[] bytes = new byte[(int) SIZE];
        Random random = new Random(seed);
        for (long[] range : ranges) {
            byte[] data = new byte[(int) range[1]];
            random.nextBytes(data);
            System.arraycopy(data, 0, bytes, (int) range[0], data.length);
        }
        return bytes;
    }

    private CopyStream.Source source(byte[] bytes) throws Exception {
        Path file = Files.write(dir.resolve("source-" + Arrays.hashCode(bytes)), bytes);
        return (from, chunks) -> ImageContent.readDevice(file, SIZE, from, chunks);
    }

    private byte[] copyData(String name) throws Exception {
        return Arrays.copyOf(Files.readAllBytes(lvm.find(LvmPool.SNAPSHOT_PREFIX + name).orElseThrow().device()), (int) SIZE);
    }

    @Test
    void aCopyIsWrittenWholeThenTheNextOnItsBaseWithOnlyWhatChanged() throws Exception {
        LvmPool pool = pool();
        byte[] first = content(1, new long[] {0, 2 * MIB}, new long[] {5 * MIB, 4096});
        SnapshotRecord receiving = pool.snapshotCopies().receive("snap-1", "node-a", snapshot("snap-1", 100), "");
        assertEquals(SnapshotRecord.State.RECEIVING, receiving.getState());
        assertEquals("node-a", receiving.getOriginNode());
        assertTrue(pool.snapshots().list().isEmpty(), "not listed while received");
        assertFalse(lvm.find(LvmPool.SNAPSHOT_PREFIX + "snap-1").orElseThrow().active(), "inactive between streams");
        Snapshot copy = CopyStream.stream(pool.snapshotCopies(), "snap-1", source(first), SIZE, List.of(), "tag-1", Long.MAX_VALUE);
        assertEquals("node-a", copy.getOriginNode());
        assertEquals(List.of("node-b"), copy.getCopyNodesList());
        assertArrayEquals(first, copyData("snap-1"));
        assertEquals(List.of(copy), pool.snapshots().list(), "listed once complete");
        assertEquals(SnapshotRecord.State.READY, pool.snapshotCopies().receive("snap-1", "node-a", snapshot("snap-1", 100), "").getState(),
                "asked again: complete");

        // Rewritten: a MiB of data with zeros, a block of data with zeros (a discard of part of a
        // thin chunk, which keeps its data), data elsewhere; the changed ranges cover them.
        byte[] second = first.clone();
        Arrays.fill(second, (int) MIB, (int) (2 * MIB), (byte) 0);
        Arrays.fill(second, (int) (5 * MIB), (int) (5 * MIB + 4096), (byte) 0);
        byte[] fresh = content(2, new long[] {6 * MIB, 64 * 1024});
        System.arraycopy(fresh, (int) (6 * MIB), second, (int) (6 * MIB), 64 * 1024);
        List<BlockRange> changed = List.of(new BlockRange(MIB, MIB), new BlockRange(5 * MIB, 4096), new BlockRange(6 * MIB, 64 * 1024));
        SnapshotRecord built = pool.snapshotCopies().receive("snap-2", "node-a", snapshot("snap-2", 200), "snap-1");
        assertEquals("snap-1", built.getBaseSnapshot(), "built on the copy of snap-1");
        assertArrayEquals(first, copyData("snap-2"), "a thin snapshot of its base: its content to begin with");
        CopyStream.stream(pool.snapshotCopies(), "snap-2", source(second), SIZE, changed, "tag-2", Long.MAX_VALUE);
        assertArrayEquals(second, copyData("snap-2"), "the base plus what changed, zeros where rewritten with zeros");
        assertArrayEquals(first, copyData("snap-1"), "the base is as it was");

        // Restored on this node, deleted as any snapshot.
        pool.create("pvc-restored", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN,
                Optional.of(ContentSource.newBuilder().setSnapshot("snap-2").build()), false, 1);
        assertArrayEquals(second, Arrays.copyOf(Files.readAllBytes(lvm.find("pvc-restored").orElseThrow().device()), (int) SIZE));
        pool.delete("pvc-restored");
        pool.snapshots().delete("snap-2");
        pool.snapshots().delete("snap-1");
        assertEquals(List.of(), lvm.list(), "nothing left");
    }

    @Test
    void aCopyBeingReceivedOutlivesARestartResumesAndStartsOverFromItsBaseForOtherContent() throws Exception {
        LvmPool pool = pool();
        byte[] first = content(3, new long[] {0, SIZE});
        CopyStream.stream(pool.snapshotCopies(), receive(pool, "snap-1", 100, ""), source(first), SIZE, List.of(), "tag-1", Long.MAX_VALUE);
        byte[] second = content(4, new long[] {0, SIZE});
        List<BlockRange> all = List.of(new BlockRange(0, SIZE));
        assertNull(CopyStream.stream(pool.snapshotCopies(), receive(pool, "snap-2", 200, "snap-1"), source(second), SIZE, all, "tag-2",
                3 * MIB), "cut short");

        LvmPool again = pool(); // node-server started again
        SnapshotRecord kept = again.snapshotCopies().receive("snap-2", "node-a", snapshot("snap-2", 200), "snap-other");
        assertEquals(SnapshotRecord.State.RECEIVING, kept.getState());
        assertEquals("snap-1", kept.getBaseSnapshot(), "a copy begun keeps its base");
        assertEquals(3 * MIB, kept.getReceivedBytes());
        CopyStream.stream(again.snapshotCopies(), "snap-2", source(second), SIZE, all, "tag-2", Long.MAX_VALUE);
        assertArrayEquals(second, copyData("snap-2"));

        byte[] third = content(5, new long[] {MIB, MIB});
        byte[] expected = first.clone();
        System.arraycopy(third, (int) MIB, expected, (int) MIB, (int) MIB);
        receive(again, "snap-3", 300, "snap-1");
        try (IncomingContent content = again.snapshotCopies().target("snap-3").open()) {
            content.write(0, 4 * MIB, java.nio.ByteBuffer.wrap(new byte[4096]).put(0, (byte) 9)); // some other content's
        }
        again.snapshotCopies().target("snap-3").restart("old content");
        CopyStream.stream(again.snapshotCopies(), "snap-3", source(expected), SIZE, List.of(new BlockRange(MIB, MIB)), "tag-3",
                Long.MAX_VALUE);
        assertArrayEquals(expected, copyData("snap-3"), "other content: the base's again, then the stream");
    }

    @Test
    void anAbandonedCopyIsRemovedAndItsNameAndBaseAreChecked() throws Exception {
        LvmPool pool = pool();
        receive(pool, "snap-1", 100, "");
        assertEquals(List.of("snap-1"), pool.snapshotCopies().names());
        assertEquals(Status.Code.ALREADY_EXISTS, code(() -> pool.snapshotCopies().receive("snap-1", "node-c", snapshot("snap-1", 100), "")),
                "another origin's");
        assertEquals(Status.Code.ALREADY_EXISTS, code(() -> pool.snapshots().take("snap-1", "pvc-far", false)), "a take of its name");
        clock.advance(Duration.ofMinutes(59));
        assertFalse(pool.snapshotCopies().removeIfAbandoned("snap-1", Duration.ofHours(1)));
        clock.advance(Duration.ofMinutes(1));
        assertTrue(pool.snapshotCopies().removeIfAbandoned("snap-1", Duration.ofHours(1)));
        assertEquals(List.of(), lvm.list());
        assertTrue(pool.snapshotCopies().names().isEmpty());

        CopyStream.stream(pool.snapshotCopies(), receive(pool, "snap-2", 200, ""), source(content(6, new long[] {0, MIB})), SIZE, List.of(),
                "tag", Long.MAX_VALUE);
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> pool.snapshotCopies().receive("snap-3", "node-a", snapshot("snap-3", 100),
                "snap-2")), "a base taken later");
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> pool.snapshotCopies().receive("snap-3", "node-a",
                snapshot("snap-3", 300).toBuilder().setSourceVolume("pvc-other").build(), "snap-2")), "a base of another volume");
        assertEquals("", pool.snapshotCopies().receive("snap-3", "node-b", snapshot("snap-3", 300), "snap-2").getBaseSnapshot(),
                "a base from another origin is no base: the whole content is sent");
    }

    private String receive(LvmPool pool, String name, long seconds, String base) throws Exception {
        pool.snapshotCopies().receive(name, "node-a", snapshot(name, seconds), base);
        return name;
    }

    private static Status.Code code(org.junit.jupiter.api.function.Executable call) {
        return assertThrows(CsiException.class, call).code();
    }
}
