package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.blocks.BlockPattern;
import dev.strata.csi.node.local.blocks.BlockRange;
import dev.strata.csi.node.local.fs.SystemFilesystemFreezer;
import dev.strata.csi.node.local.image.InMemoryLoopDevices;
import dev.strata.csi.node.local.image.SystemImageFiles;
import dev.strata.csi.node.mount.InMemoryMounter;
import dev.strata.csi.node.mount.SystemFilesystemStats;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.SystemState;
import java.io.PrintStream;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The image pool's changed-block engine on real filesystems, loop-mounted here: xfs and btrfs
 * (snapshots are reflinks: the extent maps tell the changed blocks without reading) and ext4
 * (sparse copies: the engine reads the blocks allocated in either snapshot and compares them).
 * Known blocks written between two snapshots are all in the delta and nothing else is, on every
 * filesystem; the allocated ranges cover every block written. Prints what each delta read.
 */
@Tag("root")
class ImageChangedBlocksTest {

    private static final long MIB = 1024 * 1024;

    @TempDir
    Path dir;

    @AfterEach
    void cleanUp() throws Exception {
        SystemState.cleanUp(dir);
    }

    @ParameterizedTest
    @CsvSource({"xfs, true", "btrfs, true", "ext4, false"})
    void knownBlocksWrittenBetweenTwoSnapshotsAreTheDelta(String fsType, boolean reflinks) throws Exception {
        ImagePool pool = pool(fsType);
        long size = 64 * MIB;
        pool.create("pvc-cbt", size, Allocation.SPARSE, LvType.LV_TYPE_UNSPECIFIED, Optional.empty(), false, 1);
        Path image = pool.imagePath("pvc-cbt");
        List<BlockRange> before = BlockPattern.firstLastAndAcross(size, 0);
        List<BlockRange> after = new ArrayList<>(BlockPattern.firstLastAndAcross(size, 3));
        after.add(new BlockRange(8 * MIB, 1024 * 1024 + 3 * BlockPattern.BLOCK)); // a long run, not chunk-aligned at its end
        BlockPattern.write(image, before, (byte) 1);
        pool.snapshots().take("snapshot-cbt-1", "pvc-cbt", false);
        BlockPattern.write(image, after, (byte) 2);
        pool.snapshots().take("snapshot-cbt-2", "pvc-cbt", false);

        BlockPattern.Answer delta = BlockPattern.changed(pool, "snapshot-cbt-1", "snapshot-cbt-2", 0);
        BlockPattern.assertCovers(delta.ranges(), after);
        BlockPattern.assertNear(delta.ranges(), after, BlockPattern.BLOCK); // exact to the 4 KiB block on every filesystem here
        if (reflinks) {
            assertEquals(0, delta.bytesRead(), "reflinked snapshots: the extent maps tell, nothing is read");
        } else {
            assertTrue(delta.bytesRead() > 0, "ext4: no shared extents, the allocated blocks are read and compared");
        }
        BlockPattern.Answer allocated = BlockPattern.allocated(pool, "snapshot-cbt-2", 0);
        BlockPattern.assertCovers(allocated.ranges(), before);
        BlockPattern.assertCovers(allocated.ranges(), after);
        assertTrue(allocated.rangeBytes() < size / 4, "the holes are not allocated: " + allocated.ranges());
        // Paging: from the middle, the same ranges past it, the one spanning it cut there.
        long middle = size / 2 + 2048;
        BlockPattern.Answer tail = BlockPattern.changed(pool, "snapshot-cbt-1", "snapshot-cbt-2", middle);
        long aligned = middle / BlockPattern.BLOCK * BlockPattern.BLOCK;
        assertEquals(delta.ranges().stream().filter(r -> r.end() > aligned)
                .map(r -> new BlockRange(Math.max(r.offset(), aligned), r.end() - Math.max(r.offset(), aligned))).toList(), tail.ranges());
        // The same snapshot twice: nothing changed.
        assertEquals(List.of(), BlockPattern.changed(pool, "snapshot-cbt-2", "snapshot-cbt-2", 0).ranges());
        System.out.printf("cbt: %s, 64 MiB sparse volume, %d bytes written between snapshots: delta %d ranges, %d bytes, read %d bytes%n",
                fsType, after.stream().mapToLong(BlockRange::length).sum(), delta.ranges().size(), delta.rangeBytes(), delta.bytesRead());
    }

    /**
     * The figure the docs give: a volume full of data, 1% of its 4 KiB blocks rewritten at random
     * between two snapshots; what the delta reads on each filesystem against reading both whole.
     */
    @ParameterizedTest
    @CsvSource({"xfs", "ext4"})
    void onePercentChangedOfAFullVolume(String fsType) throws Exception {
        ImagePool pool = pool(fsType);
        long size = 128 * MIB;
        pool.create("pvc-full", size, Allocation.SPARSE, LvType.LV_TYPE_UNSPECIFIED, Optional.empty(), false, 1);
        Path image = pool.imagePath("pvc-full");
        Random random = new Random(39);
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
            byte[] data = new byte[(int) MIB];
            for (long at = 0; at < size; at += MIB) {
                random.nextBytes(data);
                file.seek(at);
                file.write(data);
            }
            file.getFD().sync();
        }
        pool.snapshots().take("snapshot-full-1", "pvc-full", false);
        List<BlockRange> changed = new ArrayList<>();
        long blocks = size / BlockPattern.BLOCK;
        random.ints(0, (int) blocks).distinct().limit(blocks / 100).sorted()
                .forEach(block -> changed.add(new BlockRange((long) block * BlockPattern.BLOCK, BlockPattern.BLOCK)));
        BlockPattern.write(image, changed, (byte) 7);
        pool.snapshots().take("snapshot-full-2", "pvc-full", false);
        long start = System.nanoTime();
        BlockPattern.Answer delta = BlockPattern.changed(pool, "snapshot-full-1", "snapshot-full-2", 0);
        long millis = (System.nanoTime() - start) / 1_000_000;
        BlockPattern.assertCovers(delta.ranges(), changed);
        BlockPattern.assertNear(delta.ranges(), changed, BlockPattern.BLOCK);
        System.out.printf("cbt: %s, 128 MiB volume full of data, %d blocks (1%%) rewritten: delta %d bytes in %d ranges, read %d bytes"
                        + " (%.1f%% of reading both snapshots whole), %d ms%n", fsType, changed.size(), delta.rangeBytes(), delta.ranges().size(),
                delta.bytesRead(), 100.0 * delta.bytesRead() / (2 * size), millis);
    }

    private ImagePool pool(String fsType) throws Exception {
        Path backing = dir.resolve(fsType + ".fs");
        try (RandomAccessFile file = new RandomAccessFile(backing.toFile(), "rw")) {
            file.setLength(1024 * MIB); // a snapshot is admitted against the full allocation of its volume, reflink or not
        }
        String mkfs = switch (fsType) {
            case "ext4" -> SystemState.run("mkfs.ext4", "-q", "-F", backing.toString());
            case "xfs" -> SystemState.run("mkfs.xfs", "-q", "-f", backing.toString());
            default -> SystemState.run("mkfs.btrfs", "-q", "-f", backing.toString());
        };
        Path mounted = Files.createDirectory(dir.resolve("pool-" + fsType));
        String mount = SystemState.run("mount", "-o", "loop", backing.toString(), mounted.toString());
        assertTrue(SystemState.mountAt(mounted).isPresent(), mkfs + mount);
        Kernel kernel = new Kernel();
        InMemoryMounter mounter = new InMemoryMounter();
        ImagePool pool = new ImagePool(mounted, new SystemImageFiles(kernel, new SystemFilesystemStats()), new InMemoryLoopDevices(mounter),
                mounter, new SystemFilesystemFreezer(kernel), Crashes.none(), Clock.systemUTC(), new Log(new PrintStream(PrintStream.nullOutputStream()), 0));
        pool.reconcile();
        return pool;
    }
}
