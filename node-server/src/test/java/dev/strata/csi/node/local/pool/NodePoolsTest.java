package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.fs.SystemFilesystemFreezer;
import dev.strata.csi.node.local.image.InMemoryImageFiles;
import dev.strata.csi.node.local.image.InMemoryLoopDevices;
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
import java.time.Clock;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A node's pools: an image pool, an LVM pool, or both. An LVM-only node (node-server's
 * --image-pool=false) reports no image pool, so that the controller places no image volume there,
 * refuses a new one that reaches it anyway, and still serves an image volume made before. On the
 * in-memory stand-ins of the image files, loop devices and lvm2 tools.
 */
class NodePoolsTest {

    private static final long GIB = 1L << 30;

    @TempDir
    Path dir;

    private final InMemoryMounter mounter = new InMemoryMounter();
    private final Log log = new Log(new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8), 0);

    private ImagePool images() {
        return new ImagePool(dir, new InMemoryImageFiles(10 * GIB), new InMemoryLoopDevices(mounter), mounter,
                new SystemFilesystemFreezer(new Kernel()), Crashes.none(), Clock.systemUTC(), log);
    }

    private LvmPool lvm() throws Exception {
        return new LvmPool(Files.createDirectories(dir.resolve("lvm/vg-strata")),
                new InMemoryLogicalVolumes("vg-strata", 20 * GIB, "thinpool", 10 * GIB), new InMemoryThinMappings(), mounter, Crashes.none(), Clock.systemUTC(), log);
    }

    private static List<PoolKind> kinds(List<PoolStatus> statuses) {
        return statuses.stream().map(PoolStatus::getKind).toList();
    }

    @Test
    void anLvmOnlyNodeReportsNoImagePoolAndTakesNoImageVolume() throws Exception {
        ImagePool images = images();
        Volume before = PlainVolumes.create(images, "pvc-before", GIB, Allocation.SPARSE, Optional.empty()); // made while the node had one
        LvmPool lvm = lvm();
        NodePools pools = new NodePools(images, false, Optional.of(lvm));
        pools.reconcile();

        assertEquals(List.of(PoolKind.POOL_LVM), kinds(pools.statuses()), "only the LVM pool takes volumes");
        assertEquals(10 * GIB, pools.statuses().getFirst().getAvailableBytes(), "the thin pool's room");
        PoolStatus image = pools.imageStatus();
        assertEquals(PoolKind.POOL_IMAGE, image.getKind());
        assertEquals(0, image.getTotalBytes(), "the registration's pool field: no image pool");
        assertEquals(0, image.getAvailableBytes());

        for (PoolKind kind : List.of(PoolKind.POOL_IMAGE, PoolKind.POOL_KIND_UNSPECIFIED)) {
            CsiException refused = assertThrows(CsiException.class, () -> pools.forNew("pvc-new", kind));
            assertEquals(Status.Code.FAILED_PRECONDITION, refused.code(), kind.toString());
            assertTrue(refused.getMessage().contains("--image-pool=false"), refused.getMessage());
        }
        assertSame(lvm, pools.forNew("pvc-new", PoolKind.POOL_LVM));
        assertSame(images, pools.holding("pvc-before"), "a volume made before is still served");
        assertEquals(List.of(before.getName()), pools.list().stream().map(Volume::getName).toList());
        CsiException taken = assertThrows(CsiException.class, () -> pools.forNew("pvc-before", PoolKind.POOL_LVM));
        assertEquals(Status.Code.ALREADY_EXISTS, taken.code(), "one namespace across the pools");
    }

    @Test
    void aNodeHasAnImagePoolAnLvmPoolOrBothButNotNeither() throws Exception {
        assertEquals(List.of(PoolKind.POOL_IMAGE), kinds(new NodePools(images(), Optional.empty()).statuses()));
        NodePools both = new NodePools(images(), true, Optional.of(lvm()));
        assertEquals(List.of(PoolKind.POOL_IMAGE, PoolKind.POOL_LVM), kinds(both.statuses()));
        assertEquals(10 * GIB, both.imageStatus().getTotalBytes(), "the image pool's own status");
        assertThrows(IllegalArgumentException.class, () -> new NodePools(images(), false, Optional.empty()));
    }
}
