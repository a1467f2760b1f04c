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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Names, ids and paths from a request can never make the driver touch a file it does not own. */
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
                NodeStageVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(dir.toString())
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
                .setStagingTargetPath(dir.toString()).setTargetPath(path).setVolumeCapability(PipelineTest.mount("ext4")).build()));
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
                NodeStageVolumeRequest.newBuilder().setVolumeId("local/node-a/pvc-none").setStagingTargetPath(dir.toString())
                        .setVolumeCapability(capability).build())));
    }

    @Test
    void veryLongPathIsRefused() {
        String path = "/tmp/" + "x".repeat(5000);
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> cluster.node("node-a").node().nodeUnpublishVolume(
                NodeUnpublishVolumeRequest.newBuilder().setVolumeId("local/node-a/pvc-none").setTargetPath(path).build())));
    }
}
