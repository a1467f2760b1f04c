package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.lvm.SystemLogicalVolumes;
import dev.strata.csi.node.mount.MountHelpers;
import dev.strata.csi.node.mount.SystemMounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Command;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.node.local.lvm.SystemThinMappings;
import dev.strata.csi.testing.TestVolumeGroup;
import io.grpc.Status;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A new volume of the LVM pool reads as zeros where nothing was written, on the real lvm2 tools
 * and device-mapper (hack/lvm-vm.sh runs it in the VM): a volume group of its own on a disk full of
 * a pattern, whose every free extent, and nearly all of its thin pool's data, are filled with the
 * pattern again by volumes that are then removed, as a deleted tenant's volume leaves them (the
 * thin pool hands out chunks past the last it gave, not the freed ones first: the disk's pattern
 * is what those hold). A linear volume and a thin volume made
 * there by the pool, read raw, show no byte of it; the same volumes made without the pool's care
 * (a linear volume not zeroed, a thin volume in a pool with zeroing turned off) do show it, so the
 * check can fail. Then the cost: a linear volume created with and without zeroing, side by side.
 */
@Tag("root")
class LvmZeroingSystemTest {

    private static final long MIB = 1L << 20;
    /** What the deleted volumes leave in their extents. */
    private static final byte PATTERN = (byte) 0xa5;
    private static final int ROUNDS = 3;

    @TempDir
    Path dir;

    private final Log log = new Log(new PrintStream(System.out, true), 0);
    private TestVolumeGroup vg;
    private String group;
    private SystemLogicalVolumes volumes;

    @BeforeEach
    void makeVolumeGroup() throws Exception {
        // The disk held the pattern before: the thin pool's chunks too, whichever of them a new thin volume is given.
        vg = TestVolumeGroup.make(dir, "strata-zero-" + ProcessHandle.current().pid(), "1G", "384m", PATTERN);
        group = vg.name();
        volumes = new SystemLogicalVolumes(new Command(), group, TestVolumeGroup.THIN_POOL, log);
    }

    @AfterEach
    void removeVolumeGroup() throws Exception {
        if (vg != null) {
            vg.close();
        }
    }

    @Test
    void newVolumesOnExtentsADeletedVolumeFilledShowNoByteOfItAndZeroingIsTimed() throws Exception {
        LvmPool pool = new LvmPool(Files.createDirectories(dir.resolve("records")), volumes, new SystemThinMappings(new Command(), group, TestVolumeGroup.THIN_POOL, log),
                new SystemMounter(new Kernel(), new Command(), MountHelpers.none()), Crashes.none(), java.time.Clock.systemUTC(), log);
        pool.reconcile();
        long linearBytes = volumes.groupSpace().freeBytes();
        volumes.createLinear("old-linear", linearBytes, false);
        fill("old-linear");
        volumes.remove("old-linear");
        volumes.createThin("old-thin", 352 * MIB); // about 92% of the thin pool's data: under its 95% "full"
        fill("old-thin");
        volumes.remove("old-thin");

        // Without zeroing, a linear volume shows the pattern: the check below can fail.
        volumes.createLinear("unzeroed", 64 * MIB, false);
        assertTrue(patternBytes("unzeroed", false) > 0, "a linear volume not zeroed shows the deleted volume's data");
        volumes.remove("unzeroed");

        PlainVolumes.create(pool, "pvc-linear", linearBytes, LvType.LINEAR, Optional.empty()); // every extent the pattern filled
        Path linear = Path.of(pool.attach("pvc-linear", "node-1").getDevicePath());
        assertEquals(0, patternBytes("pvc-linear", false), "the new linear volume reads as zeros: " + linear);
        pool.detach("pvc-linear", "node-1");
        pool.delete("pvc-linear");

        PlainVolumes.create(pool, "pvc-thin", 256 * MIB, LvType.THIN, Optional.empty());
        pool.attach("pvc-thin", "node-1");
        assertEquals(0, patternBytes("pvc-thin", true), "4 KiB written in each MiB of the new thin volume: its chunks' rest reads as zeros");
        pool.detach("pvc-thin", "node-1");
        pool.delete("pvc-thin");

        // A thin pool without zeroing shows the pattern in a new chunk's rest, and the pool takes no thin volume in it.
        Programs.run("lvchange", "--config", TestVolumeGroup.CONFIG, "--zero", "n", group + "/" + TestVolumeGroup.THIN_POOL);
        volumes.createThin("unzeroed-thin", 64 * MIB);
        assertTrue(patternBytes("unzeroed-thin", true) > 0, "a thin pool that does not zero shows the deleted volume's data");
        volumes.remove("unzeroed-thin");
        CsiException refused = assertThrows(CsiException.class,
                () -> PlainVolumes.create(pool, "pvc-refused", 64 * MIB, LvType.THIN, Optional.empty()));
        assertEquals(Status.Code.FAILED_PRECONDITION, refused.code());
        assertTrue(pool.status().getThinFull(), "the controller places no thin volume here");
        Programs.run("lvchange", "--config", TestVolumeGroup.CONFIG, "--zero", "y", group + "/" + TestVolumeGroup.THIN_POOL);
        System.out.printf("lvm: zeroing: linear (%d MiB) and thin volumes over a deleted volume's extents read as zeros%n", linearBytes / MIB);

        // The cost: lvcreate alone, lvcreate with the pool's zeroing (blkdiscard --zeroout), and, for a disk without a
        // write-zeroes command, the same bytes written as zeros (dd, direct); each round on the same extents.
        long size = 256 * MIB;
        long plain = 0;
        long zeroed = 0;
        long written = 0;
        for (int round = 0; round < ROUNDS; round++) {
            long start = System.nanoTime();
            volumes.createLinear("timed", size, false);
            plain += System.nanoTime() - start;
            volumes.remove("timed");
            start = System.nanoTime();
            volumes.createLinear("timed", size, true);
            zeroed += System.nanoTime() - start;
            Path device = volumes.activate("timed").device();
            start = System.nanoTime();
            Programs.run("dd", "if=/dev/zero", "of=" + device, "bs=1M", "count=" + size / MIB, "oflag=direct", "status=none");
            written += System.nanoTime() - start;
            volumes.deactivate("timed");
            volumes.remove("timed");
        }
        System.out.printf("lvm: zeroing cost: a %d MiB linear volume created in %.0f ms without zeroing, %.0f ms with"
                + " (%.2fx); writing its zeros with dd took %.0f ms more (%.2fx); mean of %d%n", size / MIB, plain / 1e6 / ROUNDS,
                zeroed / 1e6 / ROUNDS, (double) zeroed / plain, written / 1e6 / ROUNDS, (double) (plain + written) / plain, ROUNDS);
    }

    /** Writes the pattern over the whole volume, activated for the while. */
    private void fill(String name) throws Exception {
        Path device = volumes.activate(name).device();
        byte[] block = new byte[(int) MIB];
        java.util.Arrays.fill(block, PATTERN);
        try (FileChannel channel = FileChannel.open(device, StandardOpenOption.WRITE)) {
            long size = channel.size();
            for (long at = 0; at < size; at += block.length) {
                channel.write(ByteBuffer.wrap(block, 0, (int) Math.min(block.length, size - at)), at);
            }
            channel.force(true);
        }
        volumes.deactivate(name);
    }

    /**
     * How many bytes of the volume, read raw, are not zero (with {@code partly}, after 4 KiB of
     * ones written at the start of each MiB, which are not counted: a thin volume's chunks are
     * then provisioned, and their rest must read as zeros). Activated for the while, when not.
     */
    private long patternBytes(String name, boolean partly) throws Exception {
        boolean wasActive = volumes.find(name).orElseThrow().active();
        Path device = volumes.activate(name).device();
        long found = 0;
        try (FileChannel channel = FileChannel.open(device, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            long size = channel.size();
            if (partly) {
                byte[] ones = new byte[4096];
                java.util.Arrays.fill(ones, (byte) 1);
                for (long at = 0; at < size; at += MIB) {
                    channel.write(ByteBuffer.wrap(ones), at);
                }
                channel.force(true);
            }
            ByteBuffer block = ByteBuffer.allocate((int) MIB);
            for (long at = 0; at < size; at += MIB) {
                block.clear();
                while (block.hasRemaining() && channel.read(block, at + block.position()) > 0) {
                    // read the whole MiB
                }
                for (int i = partly ? 4096 : 0; i < block.position(); i++) {
                    if (block.get(i) != 0) {
                        found++;
                    }
                }
            }
        }
        if (!wasActive) {
            volumes.deactivate(name);
        }
        return found;
    }
}
