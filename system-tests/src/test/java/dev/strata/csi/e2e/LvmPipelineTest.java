package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerExpandVolumeRequest;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.NodeExpandVolumeRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestVolumeGroup;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The LVM pool end to end: controller-server and two node-servers as processes, node-a with
 * {@code --volume-group} (a group of the test's own on a loop device, with a thin pool) and no
 * image pool ({@code --image-pool=false}), node-b with its image pool only. Volumes of a
 * StorageClass with {@code pool: lvm} go through create, attach (the device-mapper device
 * appears), stage, publish, writes, online growth, a thin snapshot and its restore, unpublish and
 * unstage (their mounts gone), and delete, with the effects checked with lvs, findmnt and the data
 * itself. Needs device-mapper, which this machine's kernel lacks: hack/lvm-vm.sh runs it in a VM
 * (STRATA_TEST_LVM=required there); elsewhere it is skipped.
 */
@Tag("root")
class LvmPipelineTest {

    static final long MIB = 1L << 20;
    static final Map<String, String> THIN = Map.of("pool", "lvm");
    static final Map<String, String> LINEAR = Map.of("pool", "lvm", "lvType", "linear");

    @TempDir
    static Path dir;

    static TestVolumeGroup group;
    static Cluster cluster;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        group = TestVolumeGroup.make(dir, "strata-e2e-" + ProcessHandle.current().pid(), "1G", "512m");
        // lvm2's commands take seconds in an emulated VM: calls to agents get a longer deadline than --agent-call-timeout's 5 s.
        cluster = Cluster.start(dir.resolve("cluster"), List.of("--agent-plaintext", "true"), List.of("--agent-call-timeout", "120s"),
                Map.of(), "node-b");
        // node-a has the LVM pool only, node-b the image pool only: a node may have either, or both (LvmCrashRecoveryTest's, csi-sanity's).
        cluster.startNode("node-a", Cluster.Launch.HOST.with(Map.of("VOLUME_GROUP", group.name(), "THIN_POOL", TestVolumeGroup.THIN_POOL,
                "IMAGE_POOL", "false")));
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        SystemState.cleanUp(dir.resolve("cluster"));
        if (group != null) {
            group.close();
        }
    }

    @AfterEach
    void nothingLeftBehind() throws Exception {
        // The cluster's directory only: the group's own loop device is in dir.
        assertEquals(List.of(), SystemState.cleanUp(dir.resolve("cluster")), "the test left mounts or loop devices behind");
        assertEquals(List.of(), group.driverVolumes(), "the test left logical volumes behind");
    }

    static VolumeCapability mount() {
        return PipelineTest.mount("ext4");
    }

    static CreateVolumeRequest.Builder request(String name, long bytes, Map<String, String> parameters, String node) {
        return CreateVolumeRequest.newBuilder()
                .setName(name)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(bytes))
                .addVolumeCapabilities(mount())
                .putAllParameters(parameters)
                .setAccessibilityRequirements(TopologyRequirement.newBuilder()
                        .addPreferred(PipelineTest.on(node)).addRequisite(PipelineTest.on(node)));
    }

    static long capacity(String node, Map<String, String> parameters) {
        return cluster.controller().getCapacity(GetCapacityRequest.newBuilder()
                .setAccessibleTopology(PipelineTest.on(node)).putAllParameters(parameters).build()).getAvailableCapacity();
    }

    /** GetCapacity once it is {@code expected}, or after 15 s: the agent reports its pools at its renewals. */
    static long awaitCapacity(String node, Map<String, String> parameters, long expected) throws InterruptedException {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(15);
        long available = capacity(node, parameters);
        while (available != expected && System.nanoTime() < deadline) {
            Thread.sleep(250);
            available = capacity(node, parameters);
        }
        return available;
    }

    /** A volume attached, staged and published on node-a, and its paths. */
    record Published(Volume volume, VolumeCapability capability, String device, Path staging, Path target) {}

    static Published publish(Volume volume, VolumeCapability capability) throws Exception {
        String device = cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-a").setVolumeCapability(capability).build())
                .getPublishContextMap().get("devicePath");
        String name = volume.getVolumeId().substring(volume.getVolumeId().lastIndexOf('/') + 1);
        Path staging = cluster.kubeletDir("node-a", "plugins/" + name + "/globalmount");
        Path target = cluster.kubeletDir("node-a", "pods/" + name + "/volumes").resolve(capability.hasBlock() ? "block" : "mount");
        var node = cluster.node("node-a").node();
        node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build());
        node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability).build());
        return new Published(volume, capability, device, staging, target);
    }

    /** Unpublished, unstaged (each mount gone from the mount table), detached and deleted. */
    static void unpublishAndDelete(Published p) throws Exception {
        var node = cluster.node("node-a").node();
        node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(p.volume().getVolumeId())
                .setTargetPath(p.target().toString()).build());
        assertEquals(Optional.empty(), SystemState.mountAt(p.target()), "NodeUnpublishVolume took the volume's mount off its target path");
        assertFalse(Files.exists(p.target()), "and removed the target path");
        node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(p.volume().getVolumeId())
                .setStagingTargetPath(p.staging().toString()).build());
        assertEquals(Optional.empty(), SystemState.mountAt(p.staging()), "NodeUnstageVolume took the staging mount off");
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(p.volume().getVolumeId()).setNodeId("node-a").build());
        assertFalse(Files.exists(Path.of(p.device())), "detach deactivates the logical volume: " + p.device() + " is gone");
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(p.volume().getVolumeId()).build());
    }

    static String write(Path file, int bytes) throws Exception {
        byte[] data = new byte[bytes];
        new Random(file.toString().hashCode()).nextBytes(data);
        Files.write(file, data);
        return sha256(Files.readAllBytes(file));
    }

    static String sha256(byte[] data) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
    }

    @Test
    void aThinVolumeGoesThroughEveryPhaseGrowsOnlineAndIsRestoredFromItsSnapshot() throws Exception {
        assertEquals(512 * MIB, capacity("node-a", THIN), "a thin volume can take the whole empty thin pool");
        assertEquals(0, capacity("node-b", THIN), "node-b has no LVM pool");
        assertTrue(capacity("node-b", Map.of()) > 0, "node-b's image pool");
        assertEquals(0, capacity("node-a", Map.of()), "node-a has no image pool (--image-pool=false)");
        StatusRuntimeException noImages = assertThrows(StatusRuntimeException.class,
                () -> cluster.controller().createVolume(request("pvc-image", 64 * MIB, Map.of(), "node-a").build()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, noImages.getStatus().getCode(), noImages.getMessage());
        assertTrue(noImages.getStatus().getDescription().contains("no image pool"), noImages.getMessage());
        assertFalse(Files.exists(cluster.node("node-a").pool().resolve("pvc-image.img")), "nothing made");
        long linear = capacity("node-a", LINEAR);
        assertTrue(linear > 0 && linear < 512 * MIB, "a linear volume gets the group's free extents: " + linear);

        StatusRuntimeException noPool = assertThrows(StatusRuntimeException.class,
                () -> cluster.controller().createVolume(request("pvc-nowhere", 64 * MIB, THIN, "node-b").build()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, noPool.getStatus().getCode(), noPool.getMessage());
        assertTrue(noPool.getStatus().getDescription().contains("no LVM pool"), noPool.getMessage());

        Volume volume = cluster.controller().createVolume(request("pvc-lvm", 64 * MIB, THIN, "node-a").build()).getVolume();
        assertEquals("local/node-a/pvc-lvm", volume.getVolumeId());
        assertEquals("lvm", volume.getVolumeContextMap().get("pool"));
        assertEquals("thin", volume.getVolumeContextMap().get("lvType"));
        assertEquals(List.of("pvc-lvm"), group.driverVolumes());
        assertEquals(64 * MIB, group.sizeBytes("pvc-lvm"));
        assertFalse(Files.exists(cluster.node("node-a").pool().resolve("pvc-lvm.img")), "no image file");
        assertEquals(448 * MIB, awaitCapacity("node-a", THIN, 448 * MIB), "the thin volume reserves its size: no overcommit");

        Published p = publish(volume, mount());
        assertTrue(p.device().startsWith("/dev/mapper/"), p.device());
        assertTrue(Files.exists(Path.of(p.device())), "attach activated the logical volume");
        assertEquals(p.device(), SystemState.mountAt(p.staging()).orElseThrow().source());
        assertEquals("ext4", SystemState.mountAt(p.target()).orElseThrow().fsType());
        String written = write(p.target().resolve("data"), (int) (8 * MIB));

        cluster.controller().controllerExpandVolume(ControllerExpandVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setVolumeCapability(p.capability())
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(128 * MIB)).build());
        assertEquals(128 * MIB, group.sizeBytes("pvc-lvm"), "lvextend, while mounted");
        long grown = cluster.node("node-a").node().nodeExpandVolume(NodeExpandVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setVolumePath(p.target().toString()).setStagingTargetPath(p.staging().toString())
                .setVolumeCapability(p.capability()).setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(128 * MIB)).build())
                .getCapacityBytes();
        assertEquals(128 * MIB, grown);
        long total = Files.getFileStore(p.target()).getTotalSpace();
        assertTrue(total > 100 * MIB, "ext4 grew online to fill the device: " + total);
        System.out.println("lvm: pipeline: ext4 on an LVM volume grown online through the CSI calls to " + total + " bytes");

        Snapshot snapshot = cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder()
                .setName("snap-lvm").setSourceVolumeId(volume.getVolumeId()).build()).getSnapshot();
        assertTrue(snapshot.getReadyToUse());
        assertTrue(group.driverVolumes().contains("snap.snap-lvm"), "a thin snapshot: " + group.driverVolumes());
        write(p.target().resolve("data"), (int) MIB); // changed after the snapshot

        Volume restored = cluster.controller().createVolume(request("pvc-lvm-restored", 128 * MIB, THIN, "node-a")
                .setVolumeContentSource(VolumeContentSource.newBuilder().setSnapshot(
                        VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId())))
                .build()).getVolume();
        assertEquals("local/node-a/pvc-lvm-restored", restored.getVolumeId());
        StatusRuntimeException elsewhere = assertThrows(StatusRuntimeException.class, () -> cluster.controller().createVolume(
                request("pvc-lvm-elsewhere", 128 * MIB, THIN, "node-b").setVolumeContentSource(VolumeContentSource.newBuilder()
                        .setSnapshot(VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId()))).build()));
        assertEquals(Status.Code.FAILED_PRECONDITION, elsewhere.getStatus().getCode(), elsewhere.getMessage());
        Published r = publish(restored, mount());
        assertEquals(written, sha256(Files.readAllBytes(r.target().resolve("data"))), "the restore holds the data of snapshot time");

        unpublishAndDelete(r);
        unpublishAndDelete(p);
        cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
        assertEquals(512 * MIB, awaitCapacity("node-a", THIN, 512 * MIB), "every reservation is free again");
    }

    @Test
    void aLinearBlockVolumeIsTheLogicalVolumeAndThinOvercommitIsTheStorageClasssChoice() throws Exception {
        Volume volume = cluster.controller().createVolume(request("pvc-linear", 32 * MIB, LINEAR, "node-a")
                .clearVolumeCapabilities().addVolumeCapabilities(PipelineTest.block()).build()).getVolume();
        assertEquals("linear", volume.getVolumeContextMap().get("lvType"));
        Published p = publish(volume, PipelineTest.block());
        assertEquals(32 * MIB, Long.parseLong(SystemState.run("blockdev", "--getsize64", p.target().toString()).strip()));
        byte[] data = new byte[(int) MIB];
        new Random(7).nextBytes(data);
        try (var out = new java.io.RandomAccessFile(p.target().toFile(), "rw")) {
            out.write(data);
            out.getFD().sync();
        }
        byte[] back = new byte[data.length];
        try (var in = new java.io.RandomAccessFile(p.device(), "r")) {
            in.readFully(back);
        }
        assertEquals(sha256(data), sha256(back), "the target path is the logical volume's device");
        unpublishAndDelete(p);

        StatusRuntimeException full = assertThrows(StatusRuntimeException.class,
                () -> cluster.controller().createVolume(request("pvc-big", 1024 * MIB, THIN, "node-a").build()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, full.getStatus().getCode(), "1 GiB in a 512 MiB thin pool: " + full.getMessage());
        Map<String, String> overcommit = Map.of("pool", "lvm", "thinOvercommitRatio", "2.5");
        assertEquals(1280 * MIB, capacity("node-a", overcommit), "2.5 times the thin pool");
        Volume big = cluster.controller().createVolume(request("pvc-big", 1024 * MIB, overcommit, "node-a").build()).getVolume();
        assertEquals(1024 * MIB, group.sizeBytes("pvc-big"), "overcommitted, as the StorageClass allows");
        assertEquals(0, awaitCapacity("node-a", THIN, 0), "without overcommit, nothing more fits");
        assertEquals(256 * MIB, awaitCapacity("node-a", overcommit, 256 * MIB), "with it, what the ratio leaves");
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(big.getVolumeId()).build());

        StatusRuntimeException mixed = assertThrows(StatusRuntimeException.class, () -> cluster.controller().createVolume(
                request("pvc-mixed", 32 * MIB, Map.of("pool", "lvm", "allocation", "full"), "node-a").build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, mixed.getStatus().getCode(), mixed.getMessage());
    }
}
