package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.BlockPattern;
import dev.strata.csi.node.local.blocks.BlockRange;
import dev.strata.csi.node.local.fs.SystemFilesystemFreezer;
import dev.strata.csi.node.local.image.SystemImageFiles;
import dev.strata.csi.node.local.image.InMemoryLoopDevices;
import dev.strata.csi.node.local.lvm.InMemoryLogicalVolumes;
import dev.strata.csi.node.local.lvm.InMemoryThinMappings;
import dev.strata.csi.node.mount.InMemoryMounter;
import dev.strata.csi.node.mount.SystemFilesystemStats;
import dev.strata.csi.system.Crashes;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Each pool's changed-block engine: the image pool on real files in the temporary directory
 * (whatever its filesystem, reflinked or compared by reading, the answer is the same), the LVM
 * pool on the in-memory stand-ins, from the thin pool's mappings, cut to the snapshot's capacity
 * and the starting offset.
 */
class ChangedBlocksTest {

    private static final long MIB = 1L << 20;
    private static final long CHUNK = InMemoryThinMappings.CHUNK;

    @TempDir
    Path dir;

    private final Log log = new Log(new PrintStream(PrintStream.nullOutputStream()), 0);

    @Test
    void imageSnapshotsAreComparedBlockByBlockWhereTheirExtentsCannotTell() throws Exception {
        InMemoryMounter mounter = new InMemoryMounter();
        // Real files (the stand-in's copies keep only a signature's worth of content), on whatever filesystem the temporary directory has.
        ImagePool pool = new ImagePool(Files.createDirectories(dir.resolve("images")), new SystemImageFiles(new Kernel(), new SystemFilesystemStats()),
                new InMemoryLoopDevices(mounter), mounter, new SystemFilesystemFreezer(new Kernel()), Crashes.none(), Clock.systemUTC(), log);
        pool.reconcile();
        long size = 8 * MIB;
        PlainVolumes.create(pool, "pvc-a", size, Allocation.SPARSE, Optional.empty());
        Path image = pool.imagePath("pvc-a");
        BlockPattern.write(image, List.of(new BlockRange(0, 3 * BlockPattern.BLOCK)), (byte) 1);
        pool.snapshots().take("snapshot-1", "pvc-a", false);
        List<BlockRange> after = List.of(new BlockRange(BlockPattern.BLOCK, BlockPattern.BLOCK), new BlockRange(size - BlockPattern.BLOCK,
                BlockPattern.BLOCK));
        BlockPattern.write(image, after, (byte) 9);
        // The same bytes again where they were: not a change.
        BlockPattern.write(image, List.of(new BlockRange(2 * BlockPattern.BLOCK, BlockPattern.BLOCK)), (byte) 1);
        pool.snapshots().take("snapshot-2", "pvc-a", false);

        BlockPattern.Answer delta = BlockPattern.changed(pool, "snapshot-1", "snapshot-2", 0);
        assertEquals(after, delta.ranges());
        assertEquals(List.of(new BlockRange(size - BlockPattern.BLOCK, BlockPattern.BLOCK)),
                BlockPattern.changed(pool, "snapshot-1", "snapshot-2", 2 * BlockPattern.BLOCK + 1).ranges());
    }

    @Test
    void thinSnapshotsAnswerFromTheMappingsCutToCapacityAndOffset() throws Exception {
        InMemoryLogicalVolumes lvm = new InMemoryLogicalVolumes("vg-strata", 20 * GIB, "thinpool", 10 * GIB);
        InMemoryThinMappings thin = new InMemoryThinMappings();
        LvmPool pool = new LvmPool(Files.createDirectories(dir.resolve("lvm")), lvm, thin, new InMemoryMounter(), Crashes.none(),
                Clock.systemUTC(), log);
        pool.reconcile();
        long size = 10 * CHUNK + 4096; // not a whole number of chunks: the last one is cut at the capacity
        PlainVolumes.create(pool, "pvc-t", size, Allocation.SPARSE, Optional.empty());
        long volume = lvm.thinId(pool.lv("pvc-t"));
        thin.write(volume, 0, 2 * CHUNK);
        pool.snapshots().take("snapshot-t1", "pvc-t", false);
        thin.snapshot(volume, lvm.thinId(pool.lv(LvmPool.SNAPSHOT_PREFIX + "snapshot-t1")));
        thin.write(volume, CHUNK + 100, 1);
        thin.write(volume, 10 * CHUNK, 4096);
        pool.snapshots().take("snapshot-t2", "pvc-t", false);
        thin.snapshot(volume, lvm.thinId(pool.lv(LvmPool.SNAPSHOT_PREFIX + "snapshot-t2")));

        BlockPattern.Answer delta = BlockPattern.changed(pool, "snapshot-t1", "snapshot-t2", 0);
        assertEquals(List.of(new BlockRange(CHUNK, CHUNK), new BlockRange(10 * CHUNK, 4096)), delta.ranges());
        assertEquals(0, delta.bytesRead());
        assertEquals(List.of(new BlockRange(CHUNK + 8192, CHUNK - 8192), new BlockRange(10 * CHUNK, 4096)),
                BlockPattern.changed(pool, "snapshot-t1", "snapshot-t2", CHUNK + 8192 + 100).ranges(), "from an offset, 4 KiB-aligned");
        assertEquals(List.of(new BlockRange(0, 2 * CHUNK), new BlockRange(10 * CHUNK, 4096)),
                BlockPattern.allocated(pool, "snapshot-t2", 0).ranges());

        thin.failNext();
        assertThrows(DeviceException.class, () -> BlockPattern.changed(pool, "snapshot-t1", "snapshot-t2", 0));
    }

    private static final long GIB = 1L << 30;
}
