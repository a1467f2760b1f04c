package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.VolumeData.read;
import static dev.strata.csi.e2e.VolumeData.sha256;
import static dev.strata.csi.e2e.VolumeData.write;
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

    /** A volume attached, staged and published on its node, and its paths. */
    record Published(Volume volume, VolumeCapability capability, String device, Path staging, Path target) {

        String nodeId() {
            return volume.getVolumeId().split("/")[1];
        }
    }

    static Published publish(Volume volume, VolumeCapability capability) throws Exception {
        String nodeId = volume.getVolumeId().split("/")[1];
        String device = cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId(nodeId).setVolumeCapability(capability).build())
                .getPublishContextMap().get("devicePath");
        String name = volume.getVolumeId().substring(volume.getVolumeId().lastIndexOf('/') + 1);
        Path staging = cluster.stagingPath(nodeId, name);
        Path target = cluster.kubeletDir(nodeId, "pods/" + name + "/volumes").resolve(capability.hasBlock() ? "block" : "mount");
        var node = cluster.node(nodeId).node();
        node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build());
        node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability).build());
        return new Published(volume, capability, device, staging, target);
    }

    static void unpublishAndDelete(Published p) throws Exception {
        unpublish(p);
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(p.volume().getVolumeId()).build());
    }

    /** Unpublished, unstaged (each mount gone from the mount table) and detached. */
    static void unpublish(Published p) throws Exception {
        var node = cluster.node(p.nodeId()).node();
        node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(p.volume().getVolumeId())
                .setTargetPath(p.target().toString()).build());
        assertEquals(Optional.empty(), SystemState.mountAt(p.target()), "NodeUnpublishVolume took the volume's mount off its target path");
        assertFalse(Files.exists(p.target()), "and removed the target path");
        node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(p.volume().getVolumeId())
                .setStagingTargetPath(p.staging().toString()).build());
        assertEquals(Optional.empty(), SystemState.mountAt(p.staging()), "NodeUnstageVolume took the staging mount off");
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(p.volume().getVolumeId()).setNodeId(p.nodeId()).build());
        if (p.device().startsWith("/dev/mapper/")) {
            assertFalse(Files.exists(Path.of(p.device())), "detach deactivates the logical volume: " + p.device() + " is gone");
        }
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
        String written = write(p.target().resolve("data"), 8 * MIB);

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
        write(p.target().resolve("data"), MIB); // changed after the snapshot

        Volume restored = cluster.controller().createVolume(request("pvc-lvm-restored", 128 * MIB, THIN, "node-a")
                .setVolumeContentSource(VolumeContentSource.newBuilder().setSnapshot(
                        VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId())))
                .build()).getVolume();
        assertEquals("local/node-a/pvc-lvm-restored", restored.getVolumeId());
        Published r = publish(restored, mount());
        assertEquals(written, read(r.target().resolve("data")), "the restore holds the data of snapshot time");

        // Restored on node-b, which has an image pool only: the thin snapshot's device is read on node-a and streamed.
        Volume elsewhere = cluster.controller().createVolume(request("pvc-lvm-elsewhere", 128 * MIB, Map.of(), "node-b")
                .setVolumeContentSource(VolumeContentSource.newBuilder().setSnapshot(
                        VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId())))
                .build()).getVolume();
        assertEquals("local/node-b/pvc-lvm-elsewhere", elsewhere.getVolumeId());
        assertFalse(group.active("snap.snap-lvm"), "the snapshot read for the copy is deactivated after it");
        Published e = publish(elsewhere, mount());
        assertEquals(written, sha256(Files.readAllBytes(e.target().resolve("data"))), "the copy on node-b holds the data of snapshot time");
        System.out.println("lvm: copies: a thin snapshot restored into node-b's image pool, its data as at snapshot time");

        unpublishAndDelete(e);
        unpublishAndDelete(r);
        unpublishAndDelete(p);
        cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
        assertEquals(512 * MIB, awaitCapacity("node-a", THIN, 512 * MIB), "every reservation is free again");
    }

    /**
     * A group snapshot of two mounted thin volumes of node-a's LVM pool and a volume of node-b's
     * image pool: one cut (node-a's ext4 filesystems frozen while LVM takes its thin snapshots, which
     * suspend their origins), each member a thin snapshot or an image copy, each restored with the
     * content of the cut; the group deleted with its members.
     */
    @Test
    void aGroupSnapshotCutsThinVolumesAndAnImageVolumeAsOne() throws Exception {
        Published a1 = publish(cluster.controller().createVolume(request("pvc-group-1", 64 * MIB, THIN, "node-a").build()).getVolume(), mount());
        Published a2 = publish(cluster.controller().createVolume(request("pvc-group-2", 64 * MIB, THIN, "node-a").build()).getVolume(), mount());
        Published b = publish(cluster.controller().createVolume(request("pvc-group-b", 64 * MIB, Map.of(), "node-b").build()).getVolume(), mount());
        List<Published> members = List.of(a1, a2, b);
        List<String> written = new java.util.ArrayList<>();
        for (Published p : members) {
            written.add(write(p.target().resolve("data"), 2 * MIB));
        }
        var request = csi.v1.Csi.CreateVolumeGroupSnapshotRequest.newBuilder().setName("group-lvm");
        members.forEach(p -> request.addSourceVolumeIds(p.volume().getVolumeId()));
        csi.v1.Csi.VolumeGroupSnapshot taken;
        try {
            taken = cluster.groupController().createVolumeGroupSnapshot(request.build()).getGroupSnapshot();
        } catch (StatusRuntimeException e) {
            // Linux before 6.8 refuses lvcreate's suspend of an origin whose filesystem is frozen (FIFREEZE).
            String kernel = SystemState.run("uname", "-r").strip();
            assertEquals(Status.Code.FAILED_PRECONDITION, e.getStatus().getCode(), e.getMessage());
            assertTrue(e.getStatus().getDescription().contains("Linux before 6.8"), e.getMessage());
            System.out.println("lvm: group snapshot refused on kernel " + kernel + ": " + e.getStatus().getDescription());
            for (Published p : members) {
                SnapshotTest.writeNotFrozen(p.target().resolve("after-refusal"));
                unpublishAndDelete(p);
            }
            return;
        }
        assertEquals(3, taken.getSnapshotsCount());
        assertTrue(group.driverVolumes().contains("snap.group-lvm-0") && group.driverVolumes().contains("snap.group-lvm-1"),
                "thin snapshots: " + group.driverVolumes());
        for (Published p : members) {
            SnapshotTest.writeNotFrozen(p.target().resolve("after"));
        }
        List<Published> restored = new java.util.ArrayList<>();
        for (int i = 0; i < members.size(); i++) {
            Published source = members.get(i);
            Snapshot member = taken.getSnapshotsList().stream()
                    .filter(s -> s.getSourceVolumeId().equals(source.volume().getVolumeId())).findFirst().orElseThrow();
            Volume volume = cluster.controller().createVolume(request("pvc-group-r" + i, 64 * MIB, source.nodeId().equals("node-a") ? THIN
                    : Map.of(), source.nodeId()).setVolumeContentSource(VolumeContentSource.newBuilder().setSnapshot(
                            VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(member.getSnapshotId()))).build()).getVolume();
            Published r = publish(volume, mount());
            assertEquals(written.get(i), read(r.target().resolve("data")), "member " + member.getSnapshotId() + " restored");
            assertFalse(Files.exists(r.target().resolve("after")));
            restored.add(r);
        }
        System.out.println("lvm: group snapshot of 2 thin volumes and 1 image volume on 2 nodes, each member restored");
        cluster.groupController().deleteVolumeGroupSnapshot(
                csi.v1.Csi.DeleteVolumeGroupSnapshotRequest.newBuilder().setGroupSnapshotId(taken.getGroupSnapshotId())
                        .addAllSnapshotIds(taken.getSnapshotsList().stream().map(Snapshot::getSnapshotId).toList()).build());
        for (Published p : restored) {
            unpublishAndDelete(p);
        }
        for (Published p : members) {
            unpublishAndDelete(p);
        }
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

    /**
     * Copies between nodes in both directions and across pools: a raw block volume with data and
     * holes in node-b's image pool cloned into node-a's LVM pool, linear on extents that a deleted
     * volume left full of old data and thin, then the linear copy (detached: its own device is read)
     * and the thin one while attached (read from a temporary thin snapshot) cloned back into node-b's
     * image pool. Every copy's whole device must hold the source's bytes and zeros elsewhere.
     */
    @Test
    void copiesBetweenNodesReadAndWriteLogicalVolumesAndNeverShowOldData() throws Exception {
        VolumeCapability block = PipelineTest.block();
        long size = 32 * MIB;
        // Old data: a linear volume filled with 0x5a, deleted; lvremove leaves its extents as they are.
        Published dirty = publish(cluster.controller().createVolume(request("pvc-dirty", size, LINEAR, "node-a")
                .clearVolumeCapabilities().addVolumeCapabilities(block).build()).getVolume(), block);
        byte[] old = new byte[(int) size];
        java.util.Arrays.fill(old, (byte) 0x5a);
        writeAt(dirty.target(), 0, old);
        unpublishAndDelete(dirty);

        Volume source = cluster.controller().createVolume(request("pvc-image-src", size, Map.of(), "node-b")
                .clearVolumeCapabilities().addVolumeCapabilities(block).build()).getVolume();
        Published s = publish(source, block);
        byte[] content = new byte[(int) size]; // data at the start and in the middle, zeros (holes) elsewhere
        Random random = new Random(11);
        byte[] first = new byte[(int) MIB + 4096];
        random.nextBytes(first);
        byte[] middle = new byte[(int) MIB];
        random.nextBytes(middle);
        System.arraycopy(first, 0, content, 0, first.length);
        System.arraycopy(middle, 0, content, (int) (16 * MIB), middle.length);
        writeAt(s.target(), 0, first);
        writeAt(s.target(), 16 * MIB, middle);
        String expected = sha256(content);
        assertEquals(expected, sha256(readWhole(Path.of(s.device()), size)), "the source holds what was written");
        unpublish(s);

        Volume linear = cloneOf(source, "pvc-copy-linear", LINEAR, "node-a");
        Volume thin = cloneOf(source, "pvc-copy-thin", THIN, "node-a");
        assertEquals(List.of("pvc-copy-linear", "pvc-copy-thin"), group.driverVolumes().stream().sorted().toList());
        assertFalse(group.active("pvc-copy-linear") || group.active("pvc-copy-thin"), "received volumes are left inactive");
        Published l = publish(linear, block);
        assertEquals(expected, sha256(readWhole(Path.of(l.device()), size)), "the linear copy: the source's bytes, zeros elsewhere, no old data");
        unpublish(l);
        Published t = publish(thin, block);
        assertEquals(expected, sha256(readWhole(Path.of(t.device()), size)), "the thin copy: the source's bytes, zeros elsewhere");
        System.out.println("lvm: copies: an image-pool block volume cloned into node-a's LVM pool, linear and thin, byte for byte");

        Volume back = cloneOf(linear, "pvc-back-linear", Map.of(), "node-b"); // detached: the logical volume itself is read
        assertFalse(group.active("pvc-copy-linear"), "the source volume read for the copy is deactivated after it");
        Volume backThin = cloneOf(thin, "pvc-back-thin", Map.of(), "node-b"); // attached: read from a temporary thin snapshot
        assertTrue(group.active("pvc-copy-thin"), "the attached source stays active");
        assertEquals(List.of("pvc-copy-linear", "pvc-copy-thin"), group.driverVolumes().stream().sorted().toList(),
                "the temporary snapshot is gone");
        unpublishAndDelete(t);
        for (Volume copy : List.of(back, backThin)) {
            Published c = publish(copy, block);
            assertEquals(expected, sha256(readWhole(Path.of(c.device()), size)), copy.getVolumeId() + ": byte for byte");
            unpublishAndDelete(c);
        }
        System.out.println("lvm: copies: LVM volumes, detached and attached, cloned back into node-b's image pool, byte for byte");
        for (Volume done : List.of(linear, source)) {
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(done.getVolumeId()).build());
        }
    }

    /** A clone onto {@code node}, asked again as external-provisioner asks while the answer is ABORTED (a copy under way). */
    static Volume cloneOf(Volume source, String name, Map<String, String> parameters, String node) throws InterruptedException {
        CreateVolumeRequest clone = request(name, source.getCapacityBytes(), parameters, node)
                .clearVolumeCapabilities().addVolumeCapabilities(PipelineTest.block())
                .setVolumeContentSource(VolumeContentSource.newBuilder().setVolume(
                        VolumeContentSource.VolumeSource.newBuilder().setVolumeId(source.getVolumeId())))
                .build();
        return SidecarRetry.untilDone(java.time.Duration.ofMinutes(5), () -> cluster.controller().createVolume(clone).getVolume());
    }

    static void writeAt(Path device, long offset, byte[] data) throws Exception {
        try (var out = new java.io.RandomAccessFile(device.toFile(), "rw")) {
            out.seek(offset);
            out.write(data);
            out.getFD().sync();
        }
    }

    static byte[] readWhole(Path device, long size) throws Exception {
        byte[] back = new byte[(int) size];
        try (var in = new java.io.RandomAccessFile(device.toFile(), "r")) {
            in.readFully(back);
        }
        return back;
    }
}
