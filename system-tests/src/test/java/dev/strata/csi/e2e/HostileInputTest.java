package dev.strata.csi.e2e;

import dev.strata.csi.testing.SystemState;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.testing.Root;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Names, ids and paths from a request can never make the driver touch a file it does not own. */
@Tag("root")
class HostileInputTest {

    @TempDir
    static Path dir;

    static Cluster cluster;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, "node-a");
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir));
    }

    /** A staging path as kubelet would give it, below its directory. */
    private static Path staging() {
        try {
            return cluster.kubeletDir("node-a", "plugins/globalmount");
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static Status.Code code(Runnable call) {
        return assertThrows(StatusRuntimeException.class, call::run).getStatus().getCode();
    }

    @ParameterizedTest
    @ValueSource(strings = {"../../../tmp/escaped", "a/b", "/abs", ".hidden", "..", "nul\0byte", "new\nline",
        "space name", "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"})
    void volumeNamesThatCouldLeaveThePoolAreRefused(String name) throws Exception {
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                .setName(name).addVolumeCapabilities(PipelineTest.mount("ext4")).build())));
        try (var files = Files.list(cluster.node("node-a").pool())) {
            assertEquals(List.of(), files.filter(f -> !f.getFileName().toString().startsWith(".")).toList());
        }
        assertFalse(Files.exists(Path.of("/tmp/escaped.img")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"local/node-a/../../../etc/passwd", "local/node-a/x/y", "local/../node-a/v", "local/node-a/v\0",
        "../pool/v.img", "local/node-a/.pool"})
    void craftedVolumeIdsNameNothing(String id) {
        // Deleting what was never handed out succeeds and touches nothing; other calls say NOT_FOUND.
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(id).build());
        assertEquals(Status.Code.NOT_FOUND, code(() -> cluster.node("node-a").node().nodeStageVolume(
                NodeStageVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(staging().toString())
                        .setVolumeCapability(PipelineTest.mount("ext4")).build())));
        assertTrue(Files.exists(cluster.node("node-a").pool().resolve(".pool.lock")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"relative/target", "/tmp/../etc/strata-escape", "/tmp/./x", "/tmp//x", "/tmp/nul\0x", ""})
    void pathsThatAreNotPlainAbsolutePathsAreRefused(String path) {
        String id = "local/node-a/pvc-none";
        var node = cluster.node("node-a").node();
        Status.Code stage = code(() -> node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(id)
                .setStagingTargetPath(path).setVolumeCapability(PipelineTest.mount("ext4")).build()));
        Status.Code publish = code(() -> node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(id)
                .setStagingTargetPath(staging().toString()).setTargetPath(path).setVolumeCapability(PipelineTest.mount("ext4")).build()));
        Status.Code unpublish = code(() -> node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id)
                .setTargetPath(path).build()));
        assertEquals(List.of(Status.Code.INVALID_ARGUMENT, Status.Code.INVALID_ARGUMENT, Status.Code.INVALID_ARGUMENT),
                List.of(stage, publish, unpublish));
        assertFalse(Files.exists(Path.of("/etc/strata-escape")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"loop", "offset=4096", "helper=evil", "x-mount.mkdir", "bind", "a,b", "-o", "remount"})
    void mountFlagsThatCouldHideTheDeviceOrRunAProgramAreRefused(String flag) {
        VolumeCapability capability = VolumeCapability.newBuilder()
                .setMount(VolumeCapability.MountVolume.newBuilder().setFsType("ext4").addMountFlags(flag))
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER))
                .build();
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> cluster.node("node-a").node().nodeStageVolume(
                NodeStageVolumeRequest.newBuilder().setVolumeId("local/node-a/pvc-none").setStagingTargetPath(staging().toString())
                        .setVolumeCapability(capability).build())));
    }

    /** Things outside kubelet's directory a wrong path could name; each must come out unchanged. */
    @TempDir
    static Path outside;

    @Test
    void pathsOutsideKubeletsDirectoryAreRefusedAndWhatIsThereIsKept() throws Exception {
        Path file = Files.writeString(outside.resolve("passwd"), "root:x:0:0::/root:/bin/sh\n");
        Path emptyDir = Files.createDirectory(outside.resolve("empty"));
        Path device = outside.resolve("null");
        SystemState.run("mknod", device.toString(), "c", "1", "3");
        // A link inside kubelet's directory that leads out of it: the path resolves outside.
        Path link = Files.createSymbolicLink(cluster.kubeletDir("node-a", "pods").resolve("escape"), outside);
        List<String> paths = List.of(file.toString(), emptyDir.toString(), device.toString(), "/etc/passwd", "/dev/null",
                link.resolve("passwd").toString(), link.resolve("empty").toString(), dir.toString(),
                // The pool, and a directory holding it: a mount there would hide the volumes' images and records.
                cluster.node("node-a").pool().resolve("pvc-none.img").toString(), cluster.node("node-a").pool().toString(),
                cluster.node("node-a").pool().getParent().toString());
        var node = cluster.node("node-a").node();
        for (String id : List.of("local/node-a/pvc-none", "static-nfs-volume")) {
            for (String path : paths) {
                List<Status.Code> codes = List.of(
                        code(() -> node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id).setTargetPath(path).build())),
                        code(() -> node.nodeUnstageVolume(csi.v1.Csi.NodeUnstageVolumeRequest.newBuilder().setVolumeId(id)
                                .setStagingTargetPath(path).build())),
                        code(() -> node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(path)
                                .setVolumeCapability(PipelineTest.mount("ext4")).build())),
                        code(() -> node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(id)
                                .setStagingTargetPath(staging().toString()).setTargetPath(path)
                                .setVolumeCapability(PipelineTest.mount("ext4")).build())));
                assertEquals(List.of(Status.Code.INVALID_ARGUMENT, Status.Code.INVALID_ARGUMENT, Status.Code.INVALID_ARGUMENT,
                        Status.Code.INVALID_ARGUMENT), codes, id + " at " + path);
            }
        }
        assertEquals("root:x:0:0::/root:/bin/sh\n", Files.readString(file));
        assertTrue(Files.isDirectory(emptyDir));
        assertTrue(SystemState.run("stat", "--format", "%F", device.toString()).contains("character special"));
        assertTrue(Files.exists(Path.of("/dev/null")) && Files.exists(Path.of("/etc/passwd")));
        assertEquals(List.of(), SystemState.mountsUnder(outside));
    }

    @Test
    void unpublishRemovesOnlyWhatTheDriverMade() throws Exception {
        Path pods = cluster.kubeletDir("node-a", "pods/uid-kept/volumes");
        Path withContent = Files.writeString(pods.resolve("file"), "data");
        Path device = pods.resolve("device");
        SystemState.run("mknod", device.toString(), "c", "1", "3");
        Path fullDir = Files.createDirectories(pods.resolve("full"));
        Files.writeString(fullDir.resolve("inside"), "data");
        var node = cluster.node("node-a").node();
        for (String id : List.of("local/node-a/pvc-none", "static-nfs-volume")) {
            for (Path kept : List.of(withContent, device, fullDir)) {
                StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> node.nodeUnpublishVolume(
                        NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id).setTargetPath(kept.toString()).build()));
                assertEquals(Status.Code.FAILED_PRECONDITION, e.getStatus().getCode(), e.getStatus().toString());
                assertTrue(e.getStatus().getDescription().contains(kept.toString()), e.getStatus().getDescription());
            }
            // What the driver makes as a target, empty and unmounted, goes.
            Path emptyDir = Files.createDirectory(pods.resolve("empty-dir"));
            Path emptyFile = Files.createFile(pods.resolve("empty-file"));
            for (Path made : List.of(emptyDir, emptyFile)) {
                node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id).setTargetPath(made.toString()).build());
                assertFalse(Files.exists(made), made + " removed");
            }
        }
        assertEquals("data", Files.readString(withContent));
        assertTrue(SystemState.run("stat", "--format", "%F", device.toString()).contains("character special"));
        assertEquals("data", Files.readString(fullDir.resolve("inside")));
        cluster.node("node-a").process().awaitOutput("which the driver did not make; left in place"); // the log says what and why
    }

    /**
     * Unstage and unpublish take off only the volume's own mounts: another volume's mount, or a
     * filesystem a person mounted below kubelet's directory, stays mounted, whatever id the call names.
     */
    @Test
    void unstageAndUnpublishLeaveMountsThatAreNotTheVolumes() throws Exception {
        var controller = cluster.controller();
        var node = cluster.node("node-a").node();
        VolumeCapability capability = PipelineTest.mount("ext4");
        for (String name : List.of("pvc-own-a", "pvc-own-b")) {
            controller.createVolume(CreateVolumeRequest.newBuilder().setName(name).addVolumeCapabilities(capability)
                    .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(16L << 20)).build());
            controller.controllerPublishVolume(csi.v1.Csi.ControllerPublishVolumeRequest.newBuilder().setVolumeId("local/node-a/" + name)
                    .setNodeId("node-a").setVolumeCapability(capability).build());
        }
        String a = "local/node-a/pvc-own-a";
        Path staging = cluster.kubeletDir("node-a", "plugins/own-a/globalmount");
        Path target = cluster.kubeletDir("node-a", "pods/uid-own-a/volumes").resolve("mount");
        node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(a).setStagingTargetPath(staging.toString())
                .setVolumeCapability(capability).build());
        node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(a).setStagingTargetPath(staging.toString())
                .setTargetPath(target.toString()).setVolumeCapability(capability).build());
        Files.writeString(target.resolve("data"), "a's data");
        Path foreign = cluster.kubeletDir("node-a", "pods/uid-foreign/volumes/tmpfs");
        SystemState.run("mount", "-t", "tmpfs", "-o", "size=1m", "foreign-tmpfs", foreign.toString());
        try {
            Files.writeString(foreign.resolve("kept"), "a person's data");
            List<String> notA = List.of("local/node-a/pvc-own-b", "nfs/server/%2Fshare/sub/delete", "static-nfs-volume");
            for (String id : notA) {
                for (Path path : List.of(staging, target)) {
                    assertEquals(Status.Code.FAILED_PRECONDITION, code(() -> node.nodeUnpublishVolume(
                            NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id).setTargetPath(path.toString()).build())), id + " at " + path);
                    assertEquals(Status.Code.FAILED_PRECONDITION, code(() -> node.nodeUnstageVolume(csi.v1.Csi.NodeUnstageVolumeRequest
                            .newBuilder().setVolumeId(id).setStagingTargetPath(path.toString()).build())), id + " at " + path);
                }
            }
            for (String id : List.of(a, "local/node-a/pvc-own-b", "nfs/server/%2Fshare/sub/delete", "static-nfs-volume")) {
                assertEquals(Status.Code.FAILED_PRECONDITION, code(() -> node.nodeUnpublishVolume(
                        NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id).setTargetPath(foreign.toString()).build())), id);
                assertEquals(Status.Code.FAILED_PRECONDITION, code(() -> node.nodeUnstageVolume(csi.v1.Csi.NodeUnstageVolumeRequest
                        .newBuilder().setVolumeId(id).setStagingTargetPath(foreign.toString()).build())), id);
            }
            assertEquals("ext4", SystemState.mountAt(staging).orElseThrow().fsType(), "a's staging mount stays");
            assertEquals("a's data", Files.readString(target.resolve("data")), "a's publish mount stays");
            assertEquals("a person's data", Files.readString(foreign.resolve("kept")), "the foreign tmpfs stays");
            cluster.node("node-a").process().awaitOutput("left a mount that is not the volume's in place"); // the log says what and why

            // The volume's own mounts come off with its own id.
            node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(a).setTargetPath(target.toString()).build());
            node.nodeUnstageVolume(csi.v1.Csi.NodeUnstageVolumeRequest.newBuilder().setVolumeId(a).setStagingTargetPath(staging.toString()).build());
            assertEquals(List.of(), SystemState.mountsUnder(cluster.kubeletDir("node-a", "plugins/own-a")));
            assertFalse(Files.exists(target), "the target the driver made is removed");
            assertTrue(SystemState.mountAt(foreign).isPresent(), "the foreign tmpfs is still mounted");
        } finally {
            SystemState.run("umount", foreign.toString());
        }
        for (String name : List.of("pvc-own-a", "pvc-own-b")) {
            controller.controllerUnpublishVolume(csi.v1.Csi.ControllerUnpublishVolumeRequest.newBuilder()
                    .setVolumeId("local/node-a/" + name).setNodeId("node-a").build());
            controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("local/node-a/" + name).build());
        }
    }

    @Test
    void veryLongPathIsRefused() {
        String path = "/tmp/" + "x".repeat(5000);
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> cluster.node("node-a").node().nodeUnpublishVolume(
                NodeUnpublishVolumeRequest.newBuilder().setVolumeId("local/node-a/pvc-none").setTargetPath(path).build())));
    }
    /**
     * Issue 25: a target path whose last name is longer than NAME_MAX (300 x "ü", 600 bytes)
     * was INTERNAL with Java's FileSystemException text. Every path the kernel refuses for its
     * length is a bad argument (NOT_FOUND for the volume_path of the stats and expansion calls, as
     * csi-sanity expects of a path the volume is not at), said without Java text, and nothing is made.
     */
    @Test
    void pathsTooLongForTheKernelAreBadArgumentsAndTouchNothing() throws Exception {
        Path volumes = cluster.kubeletDir("node-a", "pods/uid-long/volumes/kubernetes.io~csi");
        String longest = "ü".repeat(127) + "x"; // 255 bytes: the longest name there can be
        List<String> paths = List.of(
                volumes.resolve("ü".repeat(300)).toString(),
                volumes.resolve("x".repeat(256)).toString(),
                volumes.resolve("ü".repeat(128)).resolve("mount").toString(),
                volumes + ("/" + "d".repeat(200)).repeat(21));
        var node = cluster.node("node-a").node();
        String id = "local/node-a/pvc-none";
        for (String path : paths) {
            List<StatusRuntimeException> refusals = List.of(
                    refusal(() -> node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id).setTargetPath(path).build())),
                    refusal(() -> node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(id)
                            .setStagingTargetPath(staging().toString()).setTargetPath(path).setVolumeCapability(PipelineTest.mount("ext4")).build())),
                    refusal(() -> node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(id)
                            .setStagingTargetPath(path).setTargetPath(volumes.resolve("mount").toString())
                            .setVolumeCapability(PipelineTest.mount("ext4")).build())),
                    refusal(() -> node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(path)
                            .setVolumeCapability(PipelineTest.mount("ext4")).build())),
                    refusal(() -> node.nodeUnstageVolume(csi.v1.Csi.NodeUnstageVolumeRequest.newBuilder().setVolumeId(id)
                            .setStagingTargetPath(path).build())),
                    refusal(() -> node.nodeGetVolumeStats(csi.v1.Csi.NodeGetVolumeStatsRequest.newBuilder().setVolumeId(id)
                            .setVolumePath(path).build())),
                    refusal(() -> node.nodeExpandVolume(csi.v1.Csi.NodeExpandVolumeRequest.newBuilder().setVolumeId(id)
                            .setVolumePath(path).build())));
            assertEquals(List.of(Status.Code.INVALID_ARGUMENT, Status.Code.INVALID_ARGUMENT, Status.Code.INVALID_ARGUMENT,
                    Status.Code.INVALID_ARGUMENT, Status.Code.INVALID_ARGUMENT, Status.Code.NOT_FOUND, Status.Code.NOT_FOUND),
                    refusals.stream().map(e -> e.getStatus().getCode()).toList(), path);
            for (StatusRuntimeException refused : refusals) {
                String description = String.valueOf(refused.getStatus().getDescription());
                assertFalse(description.contains("Exception") || description.contains("java."), description);
            }
        }
        try (var made = Files.list(volumes)) {
            assertEquals(List.of(), made.toList(), "nothing made below kubelet's directory");
        }
        assertEquals(List.of(), SystemState.mountsUnder(volumes));
        // The longest name the kernel takes is no bad argument: unpublishing a target that is not there is done.
        node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id).setTargetPath(volumes.resolve(longest).toString())
                .build());
    }

    private static StatusRuntimeException refusal(Runnable call) {
        return assertThrows(StatusRuntimeException.class, call::run);
    }
}
