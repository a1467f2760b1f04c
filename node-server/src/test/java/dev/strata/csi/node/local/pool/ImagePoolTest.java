package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.fs.InMemoryFilesystems;
import dev.strata.csi.node.local.fs.SystemFilesystemFreezer;
import dev.strata.csi.node.local.image.InMemoryImageFiles;
import dev.strata.csi.node.local.image.InMemoryLoopDevices;
import dev.strata.csi.node.local.image.LoopDevice;
import dev.strata.csi.node.mount.InMemoryMounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The pool's logic through its public API, on the in-memory loop devices, image files and mount
 * table (no root): one loop device per image whatever was attached behind its back, no image
 * removed while a device holds it, repeated calls without a second effect, failures of the
 * system between two steps that the retry, or the next start, completes. The same operations on
 * real devices: LocalDiskLifecycleTest and the system tests.
 */
class ImagePoolTest {

    static final long GIB = 1L << 30;

    @TempDir
    Path dir;
    @TempDir
    Path mounts;
    final InMemoryMounter mounter = new InMemoryMounter();
    InMemoryLoopDevices loops = new InMemoryLoopDevices(mounter);
    final InMemoryImageFiles files = new InMemoryImageFiles(10 * GIB);
    final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    ImagePool pool;

    @BeforeEach
    void start() {
        pool = newPool();
    }

    /** The pool as node-server makes it at a start, over the same directory. */
    ImagePool newPool() {
        return new ImagePool(dir, files, loops, mounter, new SystemFilesystemFreezer(new Kernel()), Crashes.none(), Clock.systemUTC(),
                new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0));
    }

    @Test
    void everyStepOnceAndItsRepeatChangesNothing() throws Exception {
        Volume created = PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        assertEquals(created, PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty()));
        Path image = pool.imagePath("pvc-a");
        assertEquals(GIB, Files.size(image));

        Volume attached = pool.attach("pvc-a", "node-1");
        assertEquals("/dev/loop0", attached.getDevicePath());
        assertEquals(attached, pool.attach("pvc-a", "node-1"));
        assertEquals(1, loops.list().size(), "one device for the image however often it is attached");
        assertEquals(Path.of("/dev/loop0"), loops.find(image).orElseThrow().device());

        pool.detach("pvc-a", "node-1");
        pool.detach("pvc-a", "node-1");
        assertEquals(List.of(), loops.list());

        pool.delete("pvc-a");
        pool.delete("pvc-a");
        assertFalse(Files.exists(image));
        assertEquals(Optional.empty(), pool.get("pvc-a"));
        assertEquals(10 * GIB, pool.status().getAvailableBytes());
    }

    /** A person's losetup made a second device of the image: the pool keeps one and detaches the other. */
    @Test
    void aSecondDeviceOfOneImageIsDetached() throws Exception {
        PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        Volume attached = pool.attach("pvc-a", "node-1");
        loops.attach(pool.imagePath("pvc-a"));
        assertEquals(2, loops.list().size());

        assertEquals(attached, pool.attach("pvc-a", "node-1"));
        assertEquals(List.of(Path.of("/dev/loop0")), loops.list().stream().map(LoopDevice::device).toList());
        assertTrue(logged.toString(StandardCharsets.UTF_8).contains("detached a second loop device of one image"), logged.toString());
    }

    @Test
    void aMountedVolumeIsNeitherDetachedNorDeleted() throws Exception {
        PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        String device = pool.attach("pvc-a", "node-1").getDevicePath();
        mounter.mount(device, mounts, "ext4", List.of());

        CsiException detach = assertThrows(CsiException.class, () -> pool.detach("pvc-a", "node-1"));
        assertEquals(Status.Code.FAILED_PRECONDITION, detach.code());
        assertTrue(detach.getMessage().contains("is mounted at " + mounts), detach.getMessage());
        CsiException delete = assertThrows(CsiException.class, () -> pool.delete("pvc-a"));
        assertEquals(Status.Code.FAILED_PRECONDITION, delete.code());
        assertEquals(1, loops.list().size());
        assertTrue(Files.exists(pool.imagePath("pvc-a")));
        assertTrue(pool.exists("pvc-a"));

        mounter.unmount(mounts);
        pool.delete("pvc-a");
        assertEquals(List.of(), loops.list());
        assertFalse(Files.exists(pool.imagePath("pvc-a")));
    }

    /**
     * A device some process holds open cannot be detached (the kernel defers it): the delete
     * fails and keeps the image file; once the device is let go, the retry finishes.
     */
    @Test
    void anImageIsNeverRemovedWhileADeviceHoldsIt() throws Exception {
        PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        Path device = Path.of(pool.attach("pvc-a", "node-1").getDevicePath());
        loops.holdOpen(device, true);

        DeviceException busy = assertThrows(DeviceException.class, () -> pool.delete("pvc-a"));
        assertTrue(busy.getMessage().contains("still in use"), busy.getMessage());
        assertTrue(Files.exists(pool.imagePath("pvc-a")), "the image file stays while a device holds it");
        assertFalse(pool.exists("pvc-a"), "the delete is recorded: the volume is on its way out");

        loops.holdOpen(device, false);
        pool.delete("pvc-a");
        assertFalse(Files.exists(pool.imagePath("pvc-a")));
        assertEquals(List.of(), loops.list());
    }

    @Test
    void aFailedAllocationIsMadeAgainByTheRetry() throws Exception {
        files.failNext("create");
        assertThrows(IOException.class, () -> PlainVolumes.create(pool, "pvc-a", GIB, Allocation.FULL, Optional.empty()));
        assertEquals(Optional.empty(), pool.get("pvc-a"));

        Volume image = PlainVolumes.create(pool, "pvc-a", GIB, Allocation.FULL, Optional.empty());
        assertEquals(GIB, image.getCapacityBytes());
        assertEquals(9 * GIB, pool.status().getAvailableBytes(), "allocated in full: the gigabyte is taken");
        CsiException full = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-b", 10 * GIB, Allocation.FULL, Optional.empty()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, full.code());
        assertFalse(Files.exists(pool.imagePath("pvc-b")));
    }

    /** A failed attach is recorded as wanted: the retry attaches it, and so does the next start. */
    @Test
    void aFailedAttachIsFinishedByTheRetry() throws Exception {
        PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        loops.failNext("attach");
        assertThrows(DeviceException.class, () -> pool.attach("pvc-a", "node-1"));
        assertEquals(List.of(), loops.list());
        assertEquals("/dev/loop0", pool.attach("pvc-a", "node-1").getDevicePath());
    }

    /**
     * After a reboot no loop device is left: the images recorded attached are attached again,
     * a device on an image without a record is detached, one that is mounted is left alone.
     */
    @Test
    void theNextStartBringsTheDevicesInLineWithTheRecords() throws Exception {
        PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        PlainVolumes.create(pool, "pvc-b", GIB, Allocation.SPARSE, Optional.empty());
        pool.attach("pvc-a", "node-1");

        loops = new InMemoryLoopDevices(mounter); // the reboot
        Path stray = Files.createFile(dir.resolve("pvc-stray.img"));
        Path strayMounted = Files.createFile(dir.resolve("pvc-kept.img"));
        loops.attach(stray);
        mounter.mount(loops.attach(strayMounted).device().toString(), mounts, "ext4", List.of());
        pool = newPool();
        pool.reconcile();

        assertTrue(loops.find(pool.imagePath("pvc-a")).isPresent(), "attached again");
        assertTrue(loops.find(pool.imagePath("pvc-b")).isEmpty(), "never attached");
        assertTrue(loops.find(stray).isEmpty(), "a device nothing wants is detached");
        assertTrue(loops.find(strayMounted).isPresent(), "a mounted one is left as it is");
        assertTrue(Files.exists(stray), "files the pool cannot account for are never removed");
        assertEquals(Status.Code.FAILED_PRECONDITION,
                assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-stray", GIB, Allocation.SPARSE, Optional.empty())).code());
    }

    /** The record grows first: a failure to refresh the device leaves a growth the retry finishes. */
    @Test
    void anExpansionGrowsTheFileAndTheAttachedDevice() throws Exception {
        PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        Path device = Path.of(pool.attach("pvc-a", "node-1").getDevicePath());
        loops.failNext("refresh");
        assertThrows(DeviceException.class, () -> pool.expand("pvc-a", 2 * GIB));
        assertEquals(2 * GIB, Files.size(pool.imagePath("pvc-a")));
        assertEquals(GIB, loops.sizeBytes(device));

        assertEquals(2 * GIB, pool.expand("pvc-a", 2 * GIB).getCapacityBytes());
        assertEquals(2 * GIB, loops.sizeBytes(device));
        assertEquals(2 * GIB, pool.expand("pvc-a", GIB).getCapacityBytes(), "nothing is ever shrunk");
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, assertThrows(CsiException.class, () -> pool.expand("pvc-a", 20 * GIB)).code());
    }

    /** A clone holds its source's filesystem, is never formatted, and grows its filesystem at the first stage. */
    @Test
    void aCloneCarriesItsSourcesFilesystem() throws Exception {
        PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        Path device = Path.of(pool.attach("pvc-a", "node-1").getDevicePath());
        new InMemoryFilesystems(loops, mounter).formatIfBlank(device, "xfs");
        pool.records().recordFilesystem("pvc-a", "xfs");

        ContentSource source = ContentSource.newBuilder().setVolume("pvc-a").build();
        assertEquals(Status.Code.OUT_OF_RANGE,
                assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-b", GIB / 2, Allocation.SPARSE, Optional.of(source))).code());
        Volume clone = PlainVolumes.create(pool, "pvc-b", 2 * GIB, Allocation.SPARSE, Optional.of(source));
        assertEquals(source, clone.getSource());
        assertEquals(Optional.of(new InMemoryFilesystems.Signature("xfs", GIB)), InMemoryFilesystems.signature(pool.imagePath("pvc-b")));
        assertEquals("xfs", pool.content("pvc-b").getFilesystem());
        assertTrue(pool.content("pvc-b").getGrowFilesystem());
        assertEquals(Status.Code.ALREADY_EXISTS,
                assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-b", 2 * GIB, Allocation.SPARSE, Optional.empty())).code());
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-c", 2 * GIB, Allocation.SPARSE,
                Optional.of(ContentSource.newBuilder().setSnapshot("snapshot-none").build()))).code());
    }
}
