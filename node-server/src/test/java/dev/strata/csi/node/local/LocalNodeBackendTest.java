package dev.strata.csi.node.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.VolumeCapability.AccessMode;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.node.cgroup.InMemoryPodCgroups;
import dev.strata.csi.node.local.crypt.InMemoryEncryptedDevices;
import dev.strata.csi.node.local.crypt.VolumeEncryption;
import dev.strata.csi.node.local.fs.InMemoryFilesystems;
import dev.strata.csi.node.local.fs.SystemFilesystemFreezer;
import dev.strata.csi.node.local.image.InMemoryImageFiles;
import dev.strata.csi.node.local.image.InMemoryLoopDevices;
import dev.strata.csi.node.local.pool.ImagePool;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.PlainVolumes;
import dev.strata.csi.node.mount.FilesystemUsage;
import dev.strata.csi.node.mount.InMemoryMounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Stage, publish, their undoing and expansion of local volumes through LocalNodeBackend, on the
 * in-memory loop devices, filesystems and mount table (no root): what each call leaves in the
 * mount table and on the image, that a repeat changes nothing, and that a refused or failed call
 * leaves nothing a retry trips on. The same calls on real devices: the system tests' PipelineTest.
 */
class LocalNodeBackendTest {

    static final long GIB = 1L << 30;
    static final LocalVolumeId VOLUME = new LocalVolumeId("node-1", "pvc-a");

    @TempDir
    Path dir;
    @TempDir
    Path kubelet;
    Path staging;
    Path target;
    final InMemoryMounter mounter = new InMemoryMounter();
    final InMemoryLoopDevices loops = new InMemoryLoopDevices(mounter);
    final InMemoryFilesystems filesystems = new InMemoryFilesystems(loops, mounter);
    final InMemoryImageFiles files = new InMemoryImageFiles(10 * GIB);
    ImagePool pool;
    LocalNodeBackend backend;

    @BeforeEach
    void start() throws Exception {
        Log log = new Log(new PrintStream(PrintStream.nullOutputStream()), 0);
        Path poolDir = Files.createDirectories(dir.resolve("pool"));
        staging = Files.createDirectories(kubelet.resolve("staging"));
        target = kubelet.resolve("pods/uid/volumes/mount");
        Files.createDirectories(target.getParent());
        pool = new ImagePool(poolDir, files, loops, mounter, new SystemFilesystemFreezer(new Kernel()), Crashes.none(), Clock.systemUTC(), log);
        NodePools pools = new NodePools(pool, Optional.empty());
        VolumeIoLimits ioLimits = new VolumeIoLimits(pools, mounter, kubelet, new InMemoryPodCgroups(), new PrometheusRegistry(), log);
        backend = new LocalNodeBackend("node-1", pools, filesystems, mounter,
                path -> new FilesystemUsage(GIB, GIB / 2, GIB / 2, 1000, 900, 100), ioLimits,
                new VolumeEncryption(new InMemoryEncryptedDevices(), filesystems, Crashes.none(), log), Crashes.none(), log);
        PlainVolumes.create(pool, "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        pool.attach("pvc-a", "node-1");
    }

    static VolumeCapability mount(String fsType) {
        return mount(fsType, AccessMode.Mode.SINGLE_NODE_WRITER);
    }

    static VolumeCapability mount(String fsType, AccessMode.Mode mode) {
        return VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.newBuilder().setFsType(fsType))
                .setAccessMode(AccessMode.newBuilder().setMode(mode)).build();
    }

    static VolumeCapability block() {
        return VolumeCapability.newBuilder().setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                .setAccessMode(AccessMode.newBuilder().setMode(AccessMode.Mode.SINGLE_NODE_WRITER)).build();
    }

    List<MountPoint> mountsAt(Path path) throws MountException {
        return mounter.table().all().stream().filter(m -> m.mountPoint().equals(path)).toList();
    }

    Optional<InMemoryFilesystems.Signature> signature() throws Exception {
        return InMemoryFilesystems.signature(pool.imagePath("pvc-a"));
    }

    @Test
    void stageFormatsABlankVolumeOnceAndMountsItsDevice() throws Exception {
        backend.stage(VOLUME, staging, mount("ext4"), Map.of());
        backend.stage(VOLUME, staging, mount("ext4"), Map.of());

        List<MountPoint> staged = mountsAt(staging);
        assertEquals(1, staged.size(), "a repeated stage mounts nothing more: " + staged);
        assertEquals("/dev/loop0", staged.getFirst().source());
        assertEquals("ext4", staged.getFirst().fsType());
        assertEquals(Optional.of(new InMemoryFilesystems.Signature("ext4", GIB)), signature());
        assertEquals("ext4", pool.content("pvc-a").getFilesystem(), "recorded: never formatted again");
    }

    @Test
    void aVolumeHoldingAnotherFilesystemIsNeverFormattedNorMounted() throws Exception {
        InMemoryFilesystems.sign(pool.imagePath("pvc-a"), "xfs", GIB);
        CsiException e = assertThrows(CsiException.class, () -> backend.stage(VOLUME, staging, mount("ext4"), Map.of()));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
        assertTrue(e.getMessage().contains("holds a xfs filesystem"), e.getMessage());
        assertEquals(List.of(), mountsAt(staging));
        assertEquals("xfs", signature().orElseThrow().type());
    }

    @Test
    void aVolumeUsedAsABlockDeviceIsNeverFormatted() throws Exception {
        backend.stage(VOLUME, staging, block(), Map.of());
        assertEquals(List.of(), mountsAt(staging), "a block volume is published from its device, not staged");
        CsiException e = assertThrows(CsiException.class, () -> backend.stage(VOLUME, staging, mount("ext4"), Map.of()));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
        assertEquals(Optional.empty(), signature());
    }

    @Test
    void stageAsksForWhatItNeeds() throws Exception {
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class,
                () -> backend.stage(new LocalVolumeId("node-2", "pvc-a"), staging, mount("ext4"), Map.of())).code());
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class,
                () -> backend.stage(new LocalVolumeId("node-1", "pvc-none"), staging, mount("ext4"), Map.of())).code());
        assertEquals(Status.Code.INVALID_ARGUMENT, assertThrows(CsiException.class,
                () -> backend.stage(VOLUME, kubelet.resolve("missing"), mount("ext4"), Map.of())).code());
        pool.detach("pvc-a", "node-1");
        assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(CsiException.class,
                () -> backend.stage(VOLUME, staging, mount("ext4"), Map.of())).code());
        assertEquals(Optional.empty(), signature());
    }

    /** The filesystem made before a mount that failed is recorded: the retry mounts it, formatting nothing. */
    @Test
    void aFailedMountIsDoneByTheRetry() throws Exception {
        mounter.failNext("mount");
        assertThrows(MountException.class, () -> backend.stage(VOLUME, staging, mount("ext4"), Map.of()));
        assertEquals(List.of(), mountsAt(staging));
        assertEquals("ext4", pool.content("pvc-a").getFilesystem());
        filesystems.failNext("format"); // a second mkfs would fail the stage
        backend.stage(VOLUME, staging, mount("ext4"), Map.of());
        assertEquals(1, mountsAt(staging).size());
    }

    @Test
    void publishBindsTheStagedFilesystemAndUnpublishTakesItOff() throws Exception {
        assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(CsiException.class,
                () -> backend.publish(VOLUME, staging, target, mount("ext4"), Map.of(), false)).code(), "not staged yet");
        backend.stage(VOLUME, staging, mount("ext4"), Map.of());
        backend.publish(VOLUME, staging, target, mount("ext4"), Map.of(), false);
        backend.publish(VOLUME, staging, target, mount("ext4"), Map.of(), false);

        List<MountPoint> published = mountsAt(target);
        assertEquals(1, published.size(), published.toString());
        assertEquals(mountsAt(staging).getFirst().device(), published.getFirst().device(), "the staged filesystem");
        assertFalse(published.getFirst().readOnly());
        assertEquals(Status.Code.ALREADY_EXISTS, assertThrows(CsiException.class,
                () -> backend.publish(VOLUME, staging, target, mount("ext4"), Map.of(), true)).code());
        Path second = target.resolveSibling("second");
        VolumeCapability singleWriter = mount("ext4", AccessMode.Mode.SINGLE_NODE_SINGLE_WRITER);
        assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(CsiException.class,
                () -> backend.publish(VOLUME, staging, second, singleWriter, Map.of(), false)).code(), "single writer");
        assertFalse(Files.exists(second));
        backend.publish(VOLUME, staging, second, mount("ext4"), Map.of(), true);
        assertTrue(mountsAt(second).getFirst().readOnly(), "a second, read-only publish on the node: SINGLE_NODE_WRITER allows it");
        backend.unpublish(VOLUME, second);
        assertEquals(GIB / 2, backend.stats(VOLUME, target).getUsage(0).getAvailable());

        backend.unpublish(VOLUME, target);
        backend.unpublish(VOLUME, target);
        assertEquals(List.of(), mountsAt(target));
        assertFalse(Files.exists(target), "the target the driver made is removed");
        backend.unstage(VOLUME, staging);
        assertEquals(List.of(), mountsAt(staging));
        pool.detach("pvc-a", "node-1");
        assertEquals(List.of(), loops.list());
    }

    /** An unmount the kernel refuses (a file open in the volume) fails the call and keeps the mount. */
    @Test
    void aBusyUnpublishKeepsTheMountForTheRetry() throws Exception {
        backend.stage(VOLUME, staging, mount("ext4"), Map.of());
        backend.publish(VOLUME, staging, target, mount("ext4"), Map.of(), false);
        mounter.holdOpen(target, true);
        MountException busy = assertThrows(MountException.class, () -> backend.unpublish(VOLUME, target));
        assertTrue(busy.getMessage().contains("busy"), busy.getMessage());
        assertEquals(1, mountsAt(target).size());
        assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(CsiException.class, () -> pool.detach("pvc-a", "node-1")).code());

        mounter.holdOpen(target, false);
        backend.unpublish(VOLUME, target);
        assertEquals(List.of(), mountsAt(target));
    }

    /** Someone else's mount at the staging path is not the volume's: unstage leaves it. */
    @Test
    void unstageTakesOffOnlyTheVolumesOwnMount() throws Exception {
        mounter.mount("tmpfs", staging, "tmpfs", List.of());
        assertEquals(Status.Code.ALREADY_EXISTS, assertThrows(CsiException.class,
                () -> backend.stage(VOLUME, staging, mount("ext4"), Map.of())).code());
        assertThrows(Exception.class, () -> backend.unstage(VOLUME, staging));
        assertEquals("tmpfs", mountsAt(staging).getFirst().fsType());
    }

    @Test
    void aBlockVolumeIsPublishedAsItsDeviceNode() throws Exception {
        Path device = kubelet.resolve("pods/uid/volumeDevices/pvc-a");
        Files.createDirectories(device.getParent());
        backend.stage(VOLUME, staging, block(), Map.of());
        backend.publish(VOLUME, staging, device, block(), Map.of(), false);

        MountPoint bound = mountsAt(device).getFirst();
        assertEquals("devtmpfs", bound.fsType());
        assertEquals("/loop0", bound.root());
        assertTrue(Files.isRegularFile(device));
        assertEquals(GIB, backend.stats(VOLUME, device).getUsage(0).getTotal());
        assertEquals(Status.Code.FAILED_PRECONDITION, assertThrows(CsiException.class, () -> pool.delete("pvc-a")).code());
        backend.unpublish(VOLUME, device);
        assertFalse(Files.exists(device));
        pool.delete("pvc-a");
    }

    @Test
    void expandGrowsTheMountedFilesystemToTheDevice() throws Exception {
        backend.stage(VOLUME, staging, mount("ext4"), Map.of());
        pool.expand("pvc-a", 2 * GIB);
        assertEquals(2 * GIB, backend.expand(VOLUME, staging, Optional.of(mount("ext4"))));
        assertEquals(Optional.of(new InMemoryFilesystems.Signature("ext4", 2 * GIB)), signature());
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class,
                () -> backend.expand(VOLUME, target, Optional.of(mount("ext4")))).code(), "not mounted there");
    }
}
