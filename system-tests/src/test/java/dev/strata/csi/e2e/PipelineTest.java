package dev.strata.csi.e2e;

import dev.strata.csi.testing.SystemState;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodeGetVolumeStatsRequest;
import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Topology;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeUsage;
import dev.strata.csi.testing.Root;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The whole create -> attach -> stage -> publish pipeline and back, on a controller and two
 * node-servers running as processes, with real images, loop devices, filesystems and mounts.
 */
@Tag("root")
class PipelineTest {

    static final String TOPOLOGY_KEY = "topology.strata.csi.dev/node";
    static final long MIB = 1 << 20;

    @TempDir
    static Path dir;

    static Cluster cluster;

    @BeforeAll
    static void startCluster() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, "node-a", "node-b");
    }

    @AfterAll
    static void stopCluster() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        SystemState.cleanUp(dir);
    }

    @AfterEach
    void nothingLeftBehind() throws Exception {
        List<String> leftovers = SystemState.cleanUp(dir);
        assertEquals(List.of(), leftovers, "the test left mounts or loop devices behind");
    }

    static VolumeCapability mount(String fsType) {
        return VolumeCapability.newBuilder()
                .setMount(VolumeCapability.MountVolume.newBuilder().setFsType(fsType))
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER))
                .build();
    }

    static VolumeCapability block() {
        return VolumeCapability.newBuilder()
                .setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER))
                .build();
    }

    static Topology on(String nodeId) {
        return Topology.newBuilder().putSegments(TOPOLOGY_KEY, nodeId).build();
    }

    static Volume create(String name, long bytes, VolumeCapability capability, String preferredNode) {
        return cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                .setName(name)
                .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(bytes))
                .addVolumeCapabilities(capability)
                .setAccessibilityRequirements(TopologyRequirement.newBuilder()
                        .addPreferred(on(preferredNode))
                        .addRequisite(on("node-a"))
                        .addRequisite(on("node-b")))
                .build()).getVolume();
    }

    @ParameterizedTest
    @ValueSource(strings = {"ext4", "xfs", "btrfs"})
    void mountVolumeGoesThroughEveryPhaseAndBack(String fsType) throws Exception {
        VolumeCapability capability = mount(fsType);
        long size = fsType.equals("ext4") ? 64 * MIB : 320 * MIB;
        Volume volume = create("pvc-" + fsType, size, capability, "node-b");
        assertEquals("local/node-b/pvc-" + fsType, volume.getVolumeId());
        assertEquals(size, volume.getCapacityBytes());
        assertEquals(List.of(on("node-b")), volume.getAccessibleTopologyList());
        Cluster.Node node = cluster.node("node-b");
        Path image = node.pool().resolve("pvc-" + fsType + ".img");
        assertEquals(size, Files.size(image), "the image has exactly the requested size");
        assertEquals(List.of(), SystemState.loopDevicesOf(image), "not attached before ControllerPublishVolume");

        Map<String, String> publishContext = cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-b").setVolumeCapability(capability).build()).getPublishContextMap();
        String device = publishContext.get("devicePath");
        assertEquals(List.of(device), SystemState.loopDevicesOf(image), "attached to the loop device publish_context names");

        Path staging = cluster.kubeletDir("node-b", "staging-" + fsType);
        NodeStageVolumeRequest stage = NodeStageVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString())
                .setVolumeCapability(capability).putAllPublishContext(publishContext).build();
        node.node().nodeStageVolume(stage);
        node.node().nodeStageVolume(stage); // idempotent
        SystemState.Mount staged = SystemState.mountAt(staging).orElseThrow();
        assertEquals(device, staged.source());
        assertEquals(fsType, staged.fsType());

        Path target = cluster.kubeletDir("node-b", "pod-" + fsType).resolve("mount");
        NodePublishVolumeRequest publish = NodePublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString())
                .setTargetPath(target.toString()).setVolumeCapability(capability).build();
        node.node().nodePublishVolume(publish);
        node.node().nodePublishVolume(publish); // idempotent
        assertEquals(fsType, SystemState.mountAt(target).orElseThrow().fsType());
        Files.writeString(target.resolve("hello.txt"), "written through the pod's target path");
        assertEquals("written through the pod's target path", Files.readString(staging.resolve("hello.txt")));

        NodeGetVolumeStatsResponse stats = node.node().nodeGetVolumeStats(NodeGetVolumeStatsRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setVolumePath(target.toString()).build());
        VolumeUsage bytes = stats.getUsageList().stream().filter(u -> u.getUnit() == VolumeUsage.Unit.BYTES).findFirst().orElseThrow();
        assertTrue(bytes.getTotal() > 0 && bytes.getTotal() <= size, "filesystem size within the device: " + bytes);
        assertTrue(bytes.getUsed() > 0 && bytes.getAvailable() > 0, bytes.toString());
        assertFalse(stats.getVolumeCondition().getAbnormal());

        NodeUnpublishVolumeRequest unpublish = NodeUnpublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setTargetPath(target.toString()).build();
        node.node().nodeUnpublishVolume(unpublish);
        node.node().nodeUnpublishVolume(unpublish);
        assertFalse(Files.exists(target), "target path removed");
        NodeUnstageVolumeRequest unstage = NodeUnstageVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString()).build();
        node.node().nodeUnstageVolume(unstage);
        node.node().nodeUnstageVolume(unstage);
        assertTrue(SystemState.mountAt(staging).isEmpty());

        ControllerUnpublishVolumeRequest detach = ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-b").build();
        cluster.controller().controllerUnpublishVolume(detach);
        cluster.controller().controllerUnpublishVolume(detach);
        assertEquals(List.of(), SystemState.loopDevicesOf(image));

        // Data survives a second attach and stage: the filesystem is not made again.
        String again = cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-b").setVolumeCapability(capability).build())
                .getPublishContextMap().get("devicePath");
        node.node().nodeStageVolume(stage.toBuilder().putPublishContext("devicePath", again).build());
        assertEquals("written through the pod's target path", Files.readString(staging.resolve("hello.txt")));
        node.node().nodeUnstageVolume(unstage);
        cluster.controller().controllerUnpublishVolume(detach);

        DeleteVolumeRequest delete = DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build();
        cluster.controller().deleteVolume(delete);
        cluster.controller().deleteVolume(delete);
        assertFalse(Files.exists(image), "image freed");
        try (var files = Files.list(node.pool())) {
            assertEquals(List.of(), files.filter(f -> !f.getFileName().toString().startsWith(".")).toList(), "pool empty");
        }
    }

    @Test
    void blockVolumeIsTheDeviceItselfAtTheTargetPath() throws Exception {
        VolumeCapability capability = block();
        Volume volume = create("pvc-block", 16 * MIB, capability, "node-a");
        Cluster.Node node = cluster.node("node-a");
        String device = cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-a").setVolumeCapability(capability).build())
                .getPublishContextMap().get("devicePath");
        Path staging = cluster.kubeletDir("node-a", "staging-block");
        node.node().nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build());
        assertTrue(SystemState.mountAt(staging).isEmpty(), "nothing to mount when staging a block volume");
        Path target = cluster.kubeletDir("node-a", "pod-block").resolve("dev");
        node.node().nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability).build());
        assertTrue(Files.isRegularFile(target) || !Files.isDirectory(target));
        assertTrue(SystemState.mountAt(target).isPresent(), "the device is bind-mounted onto the target file");

        byte[] pattern = "raw block data at offset 4096".getBytes(StandardCharsets.UTF_8);
        try (RandomAccessFile raw = new RandomAccessFile(target.toFile(), "rw")) {
            assertEquals(16 * MIB, raw.length() == 0 ? 16 * MIB : raw.length());
            raw.seek(4096);
            raw.write(pattern);
            raw.getFD().sync();
        }
        byte[] fromImage = new byte[pattern.length];
        try (RandomAccessFile image = new RandomAccessFile(node.pool().resolve("pvc-block.img").toFile(), "r")) {
            image.seek(4096);
            image.readFully(fromImage);
        }
        assertArrayEquals(pattern, fromImage, "what the pod writes to the device lands in the image");

        StatusRuntimeException inUse = assertThrows(StatusRuntimeException.class, () -> cluster.controller()
                .controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                        .setVolumeId(volume.getVolumeId()).setNodeId("node-a").build()));
        assertEquals(Status.Code.FAILED_PRECONDITION, inUse.getStatus().getCode(), "never detach a device a pod still uses");
        assertEquals(List.of(device), SystemState.loopDevicesOf(node.pool().resolve("pvc-block.img")));

        node.node().nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setTargetPath(target.toString()).build());
        assertFalse(Files.exists(target));
        node.node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).build());
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-a").build());
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        assertFalse(Files.exists(node.pool().resolve("pvc-block.img")));
    }

    @Test
    void aVolumeWhoseFilesystemNoLongerProbesIsNeverFormattedAgain() throws Exception {
        VolumeCapability capability = mount("ext4");
        Volume volume = create("pvc-wiped", 32 * MIB, capability, "node-a");
        Cluster.Node node = cluster.node("node-a");
        String device = cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-a").setVolumeCapability(capability).build())
                .getPublishContextMap().get("devicePath");
        Path staging = cluster.kubeletDir("node-a", "staging-wiped");
        NodeStageVolumeRequest stage = NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build();
        NodeUnstageVolumeRequest unstage = NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).build();
        try {
            node.node().nodeStageVolume(stage);
            Files.writeString(staging.resolve("precious.txt"), "data that must survive a damaged superblock");
            node.node().nodeUnstageVolume(unstage);
            // Damage the superblock the way a bad sector would: blkid now finds nothing.
            SystemState.run("wipefs", "--all", "--quiet", device);
            assertTrue(SystemState.run("blkid", "-p", device).isBlank(), "blkid sees a blank device");

            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> node.node().nodeStageVolume(stage));
            assertTrue(SystemState.mountAt(staging).isEmpty());
            assertTrue(SystemState.run("blkid", "-p", device).isBlank(), "no mkfs ran: " + refused.getStatus());
            byte[] image = Files.readAllBytes(node.pool().resolve("pvc-wiped.img"));
            assertTrue(new String(image, StandardCharsets.ISO_8859_1).contains("data that must survive a damaged superblock"),
                    "the file's blocks are still in the image");
        } finally {
            cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId("node-a").build());
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        }
    }

    @Test
    void aVolumeUsedAsARawBlockDeviceIsNeverGivenAFilesystem() throws Exception {
        Volume volume = create("pvc-raw", 16 * MIB, block(), "node-a");
        Cluster.Node node = cluster.node("node-a");
        try {
            cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId("node-a").setVolumeCapability(block()).build());
            Path staging = cluster.kubeletDir("node-a", "staging-raw");
            node.node().nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setVolumeCapability(block()).build());
            node.node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).build());
            StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> node.node().nodeStageVolume(
                    NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                            .setStagingTargetPath(staging.toString()).setVolumeCapability(mount("ext4")).build()));
            assertEquals(Status.Code.FAILED_PRECONDITION, refused.getStatus().getCode());
            assertTrue(refused.getStatus().getDescription().contains("raw block device"), refused.getStatus().getDescription());
            // Nor read-only: what blkid finds on it is whatever its user wrote there.
            VolumeCapability readOnly = mount("ext4").toBuilder().setAccessMode(VolumeCapability.AccessMode.newBuilder()
                    .setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_READER_ONLY)).build();
            StatusRuntimeException readOnlyRefused = assertThrows(StatusRuntimeException.class, () -> node.node().nodeStageVolume(
                    NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                            .setStagingTargetPath(staging.toString()).setVolumeCapability(readOnly).build()));
            assertEquals(Status.Code.FAILED_PRECONDITION, readOnlyRefused.getStatus().getCode());
            assertTrue(readOnlyRefused.getStatus().getDescription().contains("raw block device"),
                    readOnlyRefused.getStatus().getDescription());
            assertTrue(SystemState.mountAt(staging).isEmpty(), "nothing mounted at " + staging);
        } finally {
            cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId("node-a").build());
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        }
    }

    @Test
    void symlinkedKubeletDirectoryAndReadOnlyStagingWork() throws Exception {
        Volume volume = create("pvc-linked", 32 * MIB, mount("ext4"), "node-a");
        Cluster.Node node = cluster.node("node-a");
        Path real = cluster.kubeletDir("node-a", "real-kubelet");
        Path link = Files.createSymbolicLink(real.resolveSibling("linked-kubelet"), real);
        Path staging = Files.createDirectory(link.resolve("staging"));
        Path target = Files.createDirectory(link.resolve("pod")).resolve("mount");
        VolumeCapability readOnly = VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.newBuilder().setFsType("ext4"))
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_READER_ONLY))
                .build();
        NodeStageVolumeRequest stageReadOnly = NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setVolumeCapability(readOnly).build();
        NodeUnstageVolumeRequest unstage = NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).build();
        try {
            cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId("node-a").setVolumeCapability(mount("ext4")).build());
            StatusRuntimeException blank = assertThrows(StatusRuntimeException.class, () -> node.node().nodeStageVolume(stageReadOnly));
            assertEquals(Status.Code.FAILED_PRECONDITION, blank.getStatus().getCode(), "nothing to mount read-only on a new volume");

            node.node().nodeStageVolume(stageReadOnly.toBuilder().setVolumeCapability(mount("ext4")).build());
            node.node().nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(mount("ext4")).build());
            assertTrue(SystemState.mountAt(real.resolve("pod/mount")).isPresent(), "published through the symlinked directory");
            node.node().nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setTargetPath(target.toString()).build());
            assertTrue(SystemState.mountAt(real.resolve("pod/mount")).isEmpty(), "and unpublished through it");
            node.node().nodeUnstageVolume(unstage);
            assertTrue(SystemState.mountAt(real.resolve("staging")).isEmpty());

            node.node().nodeStageVolume(stageReadOnly);
            assertTrue(SystemState.mountAt(real.resolve("staging")).orElseThrow().readOnly(), "reader-only access is mounted ro");
        } finally {
            node.node().nodeUnstageVolume(unstage);
            cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId("node-a").build());
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        }
    }

    @Test
    void anImageDeletedUnderAMountedVolumeIsReportedAbnormal() throws Exception {
        Volume volume = create("pvc-vanishing", 32 * MIB, mount("ext4"), "node-a");
        Cluster.Node node = cluster.node("node-a");
        Path image = node.pool().resolve("pvc-vanishing.img");
        String device = cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-a").setVolumeCapability(mount("ext4")).build())
                .getPublishContextMap().get("devicePath");
        Path staging = cluster.kubeletDir("node-a", "staging-vanishing");
        try {
            node.node().nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setVolumeCapability(mount("ext4")).build());
            NodeGetVolumeStatsRequest statsRequest = NodeGetVolumeStatsRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setVolumePath(staging.toString()).build();
            assertFalse(node.node().nodeGetVolumeStats(statsRequest).getVolumeCondition().getAbnormal());
            Files.delete(image);
            var condition = node.node().nodeGetVolumeStats(statsRequest).getVolumeCondition();
            assertTrue(condition.getAbnormal(), condition.toString());
            assertTrue(condition.getMessage().contains("missing"), condition.getMessage());
        } finally {
            node.node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).build());
            cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId("node-a").build());
            assertFalse(SystemState.run("losetup", "--noheadings", "--output", "NAME").contains(device + "\n"),
                    "the device of the deleted image is detached too");
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        }
    }

    @Test
    void volumeOfOneNodeCannotBeAttachedToAnother() {
        Volume volume = create("pvc-elsewhere", 8 * MIB, mount("ext4"), "node-a");
        try {
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> cluster.controller()
                    .controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                            .setNodeId("node-b").setVolumeCapability(mount("ext4")).build()));
            assertEquals(Status.Code.FAILED_PRECONDITION, e.getStatus().getCode());
            StatusRuntimeException unknownNode = assertThrows(StatusRuntimeException.class, () -> cluster.controller()
                    .controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                            .setNodeId("node-z").setVolumeCapability(mount("ext4")).build()));
            assertEquals(Status.Code.NOT_FOUND, unknownNode.getStatus().getCode());
        } finally {
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        }
    }

    @Test
    void sameNameIsTheSameVolumeAndADifferentSizeIsRefused() {
        Volume first = create("pvc-same", 8 * MIB, mount("ext4"), "node-a");
        try {
            Volume again = create("pvc-same", 8 * MIB, mount("ext4"), "node-b");
            assertEquals(first, again, "a retried CreateVolume returns the volume it made, wherever it is");
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class,
                    () -> create("pvc-same", 16 * MIB, mount("ext4"), "node-a"));
            assertEquals(Status.Code.ALREADY_EXISTS, e.getStatus().getCode());
        } finally {
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(first.getVolumeId()).build());
        }
    }
}
