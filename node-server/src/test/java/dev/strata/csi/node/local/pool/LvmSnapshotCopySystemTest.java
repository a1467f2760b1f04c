package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Timestamp;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.blocks.BlockRange;
import dev.strata.csi.node.local.image.ImageContent;
import dev.strata.csi.node.local.lvm.SystemLogicalVolumes;
import dev.strata.csi.node.local.lvm.SystemThinMappings;
import dev.strata.csi.node.mount.MountHelpers;
import dev.strata.csi.node.mount.SystemMounter;
import dev.strata.csi.system.Command;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.TestVolumeGroup;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Snapshot copies in the LVM pool on the real lvm2 tools and device-mapper (hack/lvm-vm.sh): a
 * copy received whole into a new thin volume, the next built on it as a thin snapshot with only
 * the changed ranges written and a range that reads zeros unmapped (blkdiscard), byte
 * for byte; then both copies read out of the pool again, the second on the first (thin_delta
 * on the copies), into a second pool's copies; a restore from a copy; nothing left.
 */
@Tag("root")
class LvmSnapshotCopySystemTest {

    private static final long MIB = 1L << 20;
    private static final long SIZE = 32 * MIB;

    @TempDir
    Path dir;

    private final Log log = new Log(new PrintStream(System.out, true), 0);
    private TestVolumeGroup vg;
    private SystemLogicalVolumes volumes;
    private SystemThinMappings mappings;

    @BeforeEach
    void makeVolumeGroup() throws Exception {
        vg = TestVolumeGroup.make(dir, "strata-copy-" + ProcessHandle.current().pid(), "1G", "512m");
        volumes = new SystemLogicalVolumes(new Command(), vg.name(), TestVolumeGroup.THIN_POOL, log);
        mappings = new SystemThinMappings(new Command(), vg.name(), TestVolumeGroup.THIN_POOL, log);
    }

    @AfterEach
    void removeVolumeGroup() throws Exception {
        if (vg != null) {
            vg.close();
        }
    }

    private LvmPool pool(String records) throws Exception {
        LvmPool pool = new LvmPool(Files.createDirectories(dir.resolve(records)), volumes, mappings,
                new SystemMounter(new Kernel(), new Command(), MountHelpers.none()), Crashes.none(), Clock.systemUTC(), log);
        pool.reconcile();
        return pool;
    }

    @Test
    void copiesAreThinVolumesAndThinSnapshotsOfTheirBaseWithHolesKept() throws Exception {
        LvmPool pool = pool("records-a");
        byte[] first = new byte[(int) SIZE];
        Random random = new Random(7);
        fill(random, first, 0, 4 * MIB);
        fill(random, first, 20 * MIB, 2 * MIB);
        pool.snapshotCopies().receive("snap-1", "node-a", snapshot("snap-1", 100), "");
        CopyStream.stream(pool.snapshotCopies(), "snap-1", source(first), SIZE, List.of(), "tag-1", Long.MAX_VALUE);
        assertArrayEquals(first, read(pool, "snap-1"));

        byte[] second = first.clone();
        Arrays.fill(second, (int) (20 * MIB), (int) (21 * MIB), (byte) 0); // data rewritten with zeros
        fill(random, second, 64 * 1024, 64 * 1024);
        fill(random, second, 10 * MIB, 128 * 1024);
        List<BlockRange> changed = List.of(new BlockRange(64 * 1024, 64 * 1024), new BlockRange(10 * MIB, 128 * 1024),
                new BlockRange(20 * MIB, MIB));
        assertEquals("snap-1", pool.snapshotCopies().receive("snap-2", "node-a", snapshot("snap-2", 200), "snap-1").getBaseSnapshot());
        CopyStream.stream(pool.snapshotCopies(), "snap-2", source(second), SIZE, changed, "tag-2", Long.MAX_VALUE);
        assertArrayEquals(second, read(pool, "snap-2"), "the base plus what changed");
        List<BlockRange> mapped = new ArrayList<>();
        pool.changedBlocks().allocated(pool.snapshots().ready("snap-2"), 0, mapped::add);
        for (BlockRange range : mapped) {
            assertTrue(range.end() <= 20 * MIB || range.offset() >= 21 * MIB, "the MiB rewritten with zeros is unmapped: " + range);
        }
        List<BlockRange> delta = new ArrayList<>();
        pool.changedBlocks().changed(pool.snapshots().ready("snap-1"), pool.snapshots().ready("snap-2"), 0, delta::add);
        long deltaBytes = delta.stream().mapToLong(BlockRange::length).sum();
        assertTrue(deltaBytes >= MIB + 192 * 1024 && deltaBytes <= 2 * MIB, "thin_delta of the copies: what changed: " + delta);

        // Read out of this pool again, the second on the first, into another pool's copies.
        LvmPool other = pool("records-b");
        other.snapshotCopies().receive("hop-1", "node-b", snapshot("hop-1", 100), "");
        CopyStream.stream(other.snapshotCopies(), "hop-1", outgoing(pool, "snap-1"), SIZE, List.of(), "hop-tag-1", Long.MAX_VALUE);
        other.snapshotCopies().receive("hop-2", "node-b", snapshot("hop-2", 200), "hop-1");
        CopyStream.stream(other.snapshotCopies(), "hop-2", outgoing(pool, "snap-2"), SIZE, delta, "hop-tag-2", Long.MAX_VALUE);
        assertArrayEquals(second, read(other, "hop-2"), "copied on from the copy, incrementally");

        pool.create("pvc-restored", SIZE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN,
                Optional.of(ContentSource.newBuilder().setSnapshot("snap-2").build()), false, 1);
        assertArrayEquals(second, readDevice(pool.attach("pvc-restored", "node-b").getDevicePath()), "restored from the copy");
        pool.detach("pvc-restored", "node-b");
        pool.delete("pvc-restored");
        for (String name : List.of("hop-2", "hop-1")) {
            other.snapshots().delete(name);
        }
        for (String name : List.of("snap-2", "snap-1")) {
            pool.snapshots().delete(name);
        }
        assertEquals(List.of(), volumes.list(), "no logical volume left");
        System.out.printf("lvm: snapshot copies: whole, then %d changed bytes on a thin snapshot of the base; thin_delta of the copies %d bytes%n",
                changed.stream().mapToLong(BlockRange::length).sum(), deltaBytes);
    }

    private static Snapshot snapshot(String name, long seconds) {
        return Snapshot.newBuilder().setName(name).setSourceVolume("pvc-far").setCapacityBytes(SIZE)
                .setCreationTime(Timestamp.newBuilder().setSeconds(seconds)).build();
    }

    private static void fill(Random random, byte[] bytes, long offset, long length) {
        byte[] data = new byte[(int) length];
        random.nextBytes(data);
        System.arraycopy(data, 0, bytes, (int) offset, data.length);
    }

    private CopyStream.Source source(byte[] bytes) throws Exception {
        Path file = Files.write(dir.resolve("source-" + Arrays.hashCode(bytes)), bytes);
        return (from, chunks) -> ImageContent.readDevice(file, SIZE, from, chunks);
    }

    /** The pool's snapshot {@code name} as ReadContent reads it. */
    private static CopyStream.Source outgoing(LvmPool pool, String name) {
        return (from, chunks) -> {
            try (OutgoingContent content = pool.outgoing().snapshot(name)) {
                return content.read(from, chunks);
            }
        };
    }

    private byte[] read(LvmPool pool, String snapshot) throws Exception {
        String lv = pool.lv(LvmPool.SNAPSHOT_PREFIX + snapshot);
        try {
            return readDevice(volumes.activate(lv).device().toString());
        } finally {
            volumes.deactivate(lv);
        }
    }

    private static byte[] readDevice(String device) throws Exception {
        ByteBuffer bytes = ByteBuffer.allocate((int) SIZE);
        try (FileChannel file = FileChannel.open(Path.of(device), StandardOpenOption.READ)) {
            while (bytes.hasRemaining() && file.read(bytes) > 0) {
                // the whole size
            }
        }
        return bytes.array();
    }
}
