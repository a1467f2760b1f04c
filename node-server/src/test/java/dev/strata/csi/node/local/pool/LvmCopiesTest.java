package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.lvm.InMemoryLogicalVolumes;
import dev.strata.csi.node.local.lvm.InMemoryThinMappings;
import dev.strata.csi.node.mount.InMemoryMounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Copies between nodes into and out of the LVM pool, on the in-memory stand-in for the lvm2 tools
 * with each volume's data in a file ({@link InMemoryLogicalVolumes#devicesIn}): the content a
 * sender reads ({@link ImageContent#readDevice}, as ReadContent sends it: zero blocks left out)
 * written as WriteContent writes it, through {@link IncomingCopies} and {@link IncomingContent},
 * and the receiving volume's data, record and activation checked after each step. A new pool over
 * the same records and volumes stands for node-server started again after a crash.
 */
class LvmCopiesTest {

    private static final long MIB = 1L << 20;
    private static final long GIB = 1L << 30;
    private static final long SIZE = 8 * MIB;
    private static final ContentSource ELSEWHERE = ContentSource.newBuilder().setSnapshot("snap-elsewhere").build();

    @TempDir
    Path dir;

    private InMemoryLogicalVolumes lvm;
    private final MovingClock clock = new MovingClock();
    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    /** The source's content: data at the start, in the middle and at the end; zeros between. */
    private Path source;

    @BeforeEach
    void content() throws Exception {
        Files.createDirectories(dir.resolve("devices"));
        lvm = new InMemoryLogicalVolumes("vg-strata", 4 * GIB, "thinpool", 2 * GIB).devicesIn(dir.resolve("devices"));
        source = dir.resolve("source");
        byte[] bytes = new byte[(int) SIZE];
        Random random = new Random(3);
        for (long[] range : new long[][] {{0, MIB + 4096}, {3 * MIB + 8192, 12288}, {SIZE - 4096, 4096}}) {
            byte[] data = new byte[(int) range[1]];
            random.nextBytes(data);
            System.arraycopy(data, 0, bytes, (int) range[0], data.length);
        }
        Files.write(source, bytes);
    }

    private LvmPool pool() throws Exception {
        LvmPool pool = new LvmPool(dir.resolve("records"), lvm, new InMemoryThinMappings(), new InMemoryMounter(), Crashes.none(), clock,
                new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0));
        pool.reconcile();
        return pool;
    }

    /**
     * Streams the source from {@code from} into the RECEIVING volume as ContentReceiver does: the
     * chunks in order, each after the gap since the previous one. With {@code cutAt} the stream
     * stops at the first chunk at or past it, with its progress recorded, as an interrupted one.
     */
    private Optional<Volume> stream(IncomingCopies incoming, String name, long from, long cutAt) throws Exception {
        ImageRecord record = incoming.receiving(name);
        if (!record.getReceiveTag().equals("tag")) {
            incoming.restart(name, "tag");
        }
        long[] position = {from};
        try (IncomingContent target = incoming.open(name)) {
            List<long[]> sent = new ArrayList<>();
            byte[] digest = ImageContent.readDevice(source, SIZE, from, (offset, data) -> {
                if (offset >= cutAt) {
                    return;
                }
                target.write(position[0], offset, data);
                position[0] = offset + data.remaining();
                sent.add(new long[] {offset, data.remaining()});
            });
            assertFalse(sent.isEmpty());
            if (position[0] < SIZE && cutAt < Long.MAX_VALUE) {
                target.sync();
                incoming.receivedUpTo(name, position[0]);
                return Optional.empty();
            }
            target.end(position[0]);
            assertArrayEquals(digest, target.digest(), "the digest of what is on disk is the sender's");
        }
        return Optional.of(incoming.finish(name, SIZE, "ext4", false, false));
    }

    private byte[] deviceData(String name) throws Exception {
        return Files.readAllBytes(lvm.find(name).orElseThrow().device());
    }

    /** The volume's data is the source's, then zeros to its end. */
    private void holdsTheSource(String name, long capacity) throws Exception {
        byte[] data = deviceData(name);
        byte[] expected = new byte[(int) capacity];
        System.arraycopy(Files.readAllBytes(source), 0, expected, 0, (int) SIZE);
        assertArrayEquals(expected, java.util.Arrays.copyOf(data, (int) capacity), name + ": the source's bytes, zeros elsewhere");
    }

    @Test
    void aThinVolumeInAZeroingPoolReceivesOnlyTheDataAndIsReadyAndInactive() throws Exception {
        LvmPool pool = pool();
        ImageRecord record = pool.incoming().receive("pvc-copy", 12 * MIB, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, ELSEWHERE, false, 1);
        assertEquals(ImageRecord.State.RECEIVING, record.getState());
        assertFalse(record.getReceiveZeroesGaps(), "a fresh thin volume of a zeroing pool reads zeros where not written");
        assertTrue(lvm.find("pvc-copy").orElseThrow().thin());
        assertFalse(lvm.find("pvc-copy").orElseThrow().active(), "made inactive");
        assertEquals(List.of("pvc-copy"), pool.incoming().names());
        assertTrue(pool.get("pvc-copy").isEmpty(), "not listed nor found while receiving");

        Volume image = stream(pool.incoming(), "pvc-copy", 0, Long.MAX_VALUE).orElseThrow();
        assertEquals(PoolKind.POOL_LVM, image.getPool());
        assertEquals("", image.getDevicePath(), "left inactive: attach activates it");
        assertFalse(lvm.find("pvc-copy").orElseThrow().active());
        holdsTheSource("pvc-copy", 12 * MIB);
        ImageRecord ready = pool.records().ready("pvc-copy");
        assertEquals("ext4", ready.getFilesystem());
        assertTrue(ready.getGrowFilesystem(), "from a smaller source: grown at the next stage");
        assertEquals(List.of(), pool.incoming().names());
        assertEquals(ready, pool.incoming().receive("pvc-copy", 12 * MIB, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, ELSEWHERE, false, 1),
                "asked again: complete, as it is");
    }

    @Test
    void aLinearVolumeHasEveryGapWrittenWithZerosAcrossACrashAndAPoolWithoutZeroingTakesNoThinCopy() throws Exception {
        lvm.zeroing(false);
        LvmPool pool = pool();
        CsiException thin = assertThrows(CsiException.class,
                () -> pool.incoming().receive("pvc-thin", 12 * MIB, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, ELSEWHERE, false, 1));
        assertEquals(Status.Code.FAILED_PRECONDITION, thin.code());
        assertTrue(thin.getMessage().contains("lvchange --zero y"), thin.getMessage());
        assertTrue(lvm.find("pvc-thin").isEmpty() && pool.records().read("pvc-thin").isEmpty(), "nothing left");
        pool.incoming().receive("pvc-linear", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.LINEAR, ELSEWHERE, false, 1);
        assertFalse(lvm.find("pvc-linear").orElseThrow().thin());
        assertTrue(pool.records().read("pvc-linear").orElseThrow().getReceiveZeroesGaps());
        assertEquals(InMemoryLogicalVolumes.OLD_DATA, deviceData("pvc-linear")[(int) (2 * MIB)],
                "not zeroed at creation: the stream writes every byte");
        assertTrue(stream(pool.incoming(), "pvc-linear", 0, 3 * MIB).isEmpty(), "cut short");
        assertFalse(lvm.find("pvc-linear").orElseThrow().active(), "deactivated when the stream ends");
        lvm.zeroing(true);

        LvmPool again = pool(); // node-server started again
        ImageRecord record = again.incoming().receiving("pvc-linear");
        assertTrue(record.getReceiveZeroesGaps());
        assertEquals(MIB + 4096, record.getReceivedBytes(), "up to the end of the first chunk");
        assertTrue(stream(again.incoming(), "pvc-linear", record.getReceivedBytes(), Long.MAX_VALUE).isPresent());
        holdsTheSource("pvc-linear", SIZE);
        assertFalse(again.records().ready("pvc-linear").getReceiveZeroesGaps(), "READY records keep nothing of the transfer");
        assertTrue(lvm.zeroedFrom().isEmpty(), "a copy's volume is never zeroed twice");
    }

    @Test
    void aThinPoolThatStopsZeroingMidCopyHasTheRestOfTheGapsWritten() throws Exception {
        LvmPool pool = pool();
        pool.incoming().receive("pvc-copy", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, ELSEWHERE, false, 1);
        assertTrue(stream(pool.incoming(), "pvc-copy", 0, 3 * MIB).isEmpty(), "cut short");
        assertFalse(pool.incoming().receiving("pvc-copy").getReceiveZeroesGaps());
        lvm.zeroing(false); // lvchange --zero n on the thin pool before the retry
        ImageRecord record = pool.incoming().receiving("pvc-copy");
        pool.incoming().open("pvc-copy").close();
        assertTrue(pool.incoming().receiving("pvc-copy").getReceiveZeroesGaps(), "recorded before anything is written");
        lvm.zeroing(true);
        assertTrue(stream(pool.incoming(), "pvc-copy", record.getReceivedBytes(), Long.MAX_VALUE).isPresent());
        holdsTheSource("pvc-copy", SIZE);
    }

    @Test
    void otherContentStartsAThinVolumeOverEmpty() throws Exception {
        LvmPool pool = pool();
        pool.incoming().receive("pvc-copy", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, ELSEWHERE, false, 1);
        pool.incoming().restart("pvc-copy", "old content");
        try (IncomingContent target = pool.incoming().open("pvc-copy")) {
            byte[] junk = new byte[(int) MIB];
            java.util.Arrays.fill(junk, (byte) 7);
            target.write(0, 2 * MIB, ByteBuffer.wrap(junk)); // where the new content has zeros
            target.sync();
        }
        pool.incoming().receivedUpTo("pvc-copy", 3 * MIB);
        assertTrue(stream(pool.incoming(), "pvc-copy", 0, Long.MAX_VALUE).isPresent());
        holdsTheSource("pvc-copy", SIZE);
    }

    @Test
    void refusalsCarryTheirCodesAndLeaveNothing() throws Exception {
        LvmPool pool = pool();
        CsiException full = assertThrows(CsiException.class,
                () -> pool.incoming().receive("pvc-copy", 3 * GIB, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, ELSEWHERE, false, 1));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, full.code(), full.getMessage());
        assertEquals(List.of(), lvm.list());
        assertEquals(List.of(), pool.records().all());

        pool.incoming().receive("pvc-copy", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, ELSEWHERE, false, 1);
        CsiException other = assertThrows(CsiException.class,
                () -> pool.incoming().receive("pvc-copy", 2 * SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, ELSEWHERE, false, 1));
        assertEquals(Status.Code.ALREADY_EXISTS, other.code(), other.getMessage());
        CsiException create = assertThrows(CsiException.class, () -> pool.create("pvc-copy", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, Optional.empty(), false, 1));
        assertEquals(Status.Code.ALREADY_EXISTS, create.code(), "a create of a name being received: " + create.getMessage());
        pool.create("pvc-ready", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, Optional.empty(), false, 1);
        CsiException notReceiving = assertThrows(CsiException.class, () -> pool.incoming().open("pvc-ready"));
        assertEquals(Status.Code.FAILED_PRECONDITION, notReceiving.code(), notReceiving.getMessage());
        assertFalse(lvm.find("pvc-ready").orElseThrow().active());
    }

    @Test
    void anAbandonedCopyIsRemovedWithItsLogicalVolume() throws Exception {
        LvmPool pool = pool();
        pool.incoming().receive("pvc-copy", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, ELSEWHERE, false, 1);
        clock.advance(Duration.ofMinutes(59));
        assertFalse(pool.incoming().removeIfAbandoned("pvc-copy", Duration.ofHours(1)));
        clock.advance(Duration.ofMinutes(1));
        assertTrue(pool.incoming().removeIfAbandoned("pvc-copy", Duration.ofHours(1)));
        assertEquals(List.of(), lvm.list());
        assertEquals(List.of(), pool.records().all());
    }

    @Test
    void aDetachedVolumeAndASnapshotAreReadFromTheirDevicesActivatedForTheRead() throws Exception {
        LvmPool pool = pool();
        pool.create("pvc-source", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, Optional.empty(), false, 1);
        Files.copy(source, lvm.find("pvc-source").orElseThrow().device(), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        pool.snapshots().take("snap-a", "pvc-source", false);
        byte[] expected = ImageContent.digestDevice(source, SIZE);
        for (boolean snapshot : List.of(false, true)) {
            String volume = snapshot ? LvmPool.SNAPSHOT_PREFIX + "snap-a" : "pvc-source";
            try (OutgoingContent content = snapshot ? pool.outgoing().snapshot("snap-a") : pool.outgoing().volume("pvc-source")) {
                assertTrue(lvm.find(volume).orElseThrow().active(), "active while read");
                assertEquals(SIZE, content.sizeBytes());
                assertArrayEquals(expected, content.read(0, (offset, data) -> { }), volume + ": the digest an image of this content has");
            }
            assertFalse(lvm.find(volume).orElseThrow().active(), volume + ": deactivated after the read");
        }
        pool.attach("pvc-source", "node-a");
        CsiException attached = assertThrows(CsiException.class, () -> pool.outgoing().volume("pvc-source"));
        assertEquals(Status.Code.FAILED_PRECONDITION, attached.code(), attached.getMessage());
        assertTrue(lvm.find("pvc-source").orElseThrow().active(), "an attached volume stays active");
        lvm.activate(LvmPool.SNAPSHOT_PREFIX + "snap-a");
        pool.outgoing().snapshot("snap-a").close();
        assertTrue(lvm.find(LvmPool.SNAPSHOT_PREFIX + "snap-a").orElseThrow().active(), "active before the read: left active");
        pool(); // a start deactivates a snapshot a read left active (a crash), as nothing mounts it
        assertFalse(lvm.find(LvmPool.SNAPSHOT_PREFIX + "snap-a").orElseThrow().active());
        CsiException missing = assertThrows(CsiException.class, () -> pool.outgoing().snapshot("snap-b"));
        assertEquals(Status.Code.NOT_FOUND, missing.code());
    }
}
