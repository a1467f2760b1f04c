package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.NodeGetVolumeStatsRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.testing.BoundExport;
import dev.strata.csi.testing.LoopFilesystem;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * NFS volumes through controller-server and node-server as processes. This kernel has no NFS
 * client, so the export the controller works on is a real directory, bind-mounted where the
 * controller looks for the export (a pre-mounted export, as --nfs-mount-exports=false expects);
 * everything the controller does to it is real. On the node, everything up to the NFS mount is
 * real; the mount itself goes to a stand-in for mount(8) ({@link NoNfsClientMount}: it only records
 * the command line and fails as a machine without an NFS client does),
 * so the test checks the exact invocation and that a failed mount leaves nothing behind.
 */
@Tag("root")
class NfsTest {

    static final String SERVER = "nfs.example";
    static final String SHARE = "/srv/share";

    @TempDir
    static Path dir;

    static Cluster cluster;
    static Path exportData;
    static Path exportMount;
    static Path mountLog;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        // The export's data a filesystem of its own: GetCapacity is compared with its free space, which
        // other work on the machine would move on a shared disk. stop()'s cleanUp unmounts it.
        LoopFilesystem.mount(dir.resolve("export.img"), 1L << 30, dir.resolve("export-data"));
        BoundExport export = BoundExport.bind(dir, SERVER, SHARE);
        exportData = export.data();
        exportMount = export.mount();
        Path exportRoot = export.root();
        mountLog = dir.resolve("nfs-mounts.log");
        Path fakeBin = NoNfsClientMount.install(dir, mountLog);
        cluster = Cluster.start(dir, List.of("--agent-plaintext", "true"),
                List.of("--nfs-export-root", exportRoot.toString(), "--nfs-mount-exports", "false"),
                Map.of("PATH", fakeBin + ":" + System.getenv("PATH")), "node-a");
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        if (exportMount != null) {
            SystemState.cleanUp(dir);
        }
    }

    @Test
    void createMakesTheDirectoryOnceAndDeleteRemovesIt() throws Exception {
        Volume volume = create("pvc-create", Map.of(), 10 << 20);
        Path data = exportData.resolve("pvc-create");
        assertTrue(Files.isDirectory(data), "CreateVolume made the volume's directory in the export");
        assertEquals(Map.of("server", SERVER, "share", SHARE, "subDir", "pvc-create", "capacityEnforced", "false"),
                volume.getVolumeContextMap());
        assertEquals(10 << 20, volume.getCapacityBytes());
        assertTrue(volume.getAccessibleTopologyList().isEmpty(), "an NFS volume is reachable from every node");
        Files.writeString(data.resolve("file"), "data");
        assertEquals(volume, create("pvc-create", Map.of(), 10 << 20), "the same request again is the same volume");
        assertEquals("data", Files.readString(data.resolve("file")), "a repeated CreateVolume leaves the data alone");

        assertCode(Status.Code.ALREADY_EXISTS, () -> create("pvc-create", Map.of(), 20 << 20));
        assertCode(Status.Code.ALREADY_EXISTS, () -> create("pvc-other", Map.of("subDir", "pvc-create"), 10 << 20));

        delete(volume);
        assertFalse(Files.exists(data), "onDelete=delete removed the directory");
        delete(volume);
        assertEquals(List.of(), trash(), "nothing is left in the driver's trash");
    }

    @Test
    void retainKeepsTheDirectoryAndArchiveRenamesIt() throws Exception {
        Volume retained = create("pvc-retain", Map.of("onDelete", "retain"), 0);
        Files.writeString(exportData.resolve("pvc-retain/file"), "kept");
        delete(retained);
        assertEquals("kept", Files.readString(exportData.resolve("pvc-retain/file")));
        assertFalse(listed(retained.getVolumeId()), "a retained volume's record is gone");

        Volume archived = create("pvc-archive", Map.of("onDelete", "archive"), 0);
        Files.writeString(exportData.resolve("pvc-archive/file"), "archived");
        delete(archived);
        delete(archived);
        assertFalse(Files.exists(exportData.resolve("pvc-archive")));
        List<Path> archives;
        try (Stream<Path> files = Files.list(exportData)) {
            archives = files.filter(p -> p.getFileName().toString().matches("archived-pvc-archive-\\d{8}T\\d{6}Z")).toList();
        }
        assertEquals(1, archives.size(), "one dated archive: " + archives);
        assertEquals("archived", Files.readString(archives.getFirst().resolve("file")));
    }

    @Test
    void subDirTemplateIsFilledFromTheProvisionersParameters() throws Exception {
        Map<String, String> parameters = Map.of("subDir", "${pvc.metadata.namespace}/${pvc.metadata.name}-${pv.metadata.name}",
                "csi.storage.k8s.io/pvc/namespace", "team-a", "csi.storage.k8s.io/pvc/name", "claim",
                "csi.storage.k8s.io/pv/name", "pvc-tpl", "mountPermissions", "0775");
        Volume volume = create("pvc-tpl", parameters, 0);
        Path data = exportData.resolve("team-a/claim-pvc-tpl");
        assertTrue(Files.isDirectory(data));
        assertEquals("rwxrwxr-x", PosixFilePermissions.toString(Files.getPosixFilePermissions(data)));
        assertEquals("team-a/claim-pvc-tpl", volume.getVolumeContextMap().get("subDir"));
        assertEquals("0775", volume.getVolumeContextMap().get("mountPermissions"));

        assertCode(Status.Code.INVALID_ARGUMENT, () -> create("pvc-tpl2", Map.of("subDir", "${pvc.metadata.namespace}/x"), 0));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> create("pvc-tpl3", Map.of("subDir", "${pvc.metadata.labels}"), 0));
        assertCode(Status.Code.FAILED_PRECONDITION, () -> create("pvc-nested", Map.of("subDir", "team-a/claim-pvc-tpl/inner"), 0));
        delete(volume);
        assertTrue(Files.isDirectory(exportData.resolve("team-a")), "only the volume's own directory goes");
    }

    @ParameterizedTest
    @ValueSource(strings = {"../escape", "/escape", "a/../../escape", "a//b", ".", ".strata-csi/volumes", "x\0y",
        "${pvc.metadata.name", "${pv.metadata.name}/../.."})
    void subDirsThatLeaveTheShareAreRefused(String subDir) throws Exception {
        Map<String, String> parameters = Map.of("subDir", subDir, "csi.storage.k8s.io/pv/name", "..");
        List<Path> before = listTree(dir);
        assertCode(Status.Code.INVALID_ARGUMENT, () -> create("pvc-escape", parameters, 0));
        assertEquals(before, listTree(dir), "nothing was made anywhere");
    }

    @Test
    void symbolicLinksInTheExportAreNotFollowed() throws Exception {
        Path outside = Files.createDirectories(dir.resolve("outside"));
        Files.createDirectories(exportData.resolve("plain"));
        Files.createSymbolicLink(exportData.resolve("plain/link"), outside);
        assertCode(Status.Code.FAILED_PRECONDITION, () -> create("pvc-link", Map.of("subDir", "plain/link/x"), 0));
        assertFalse(Files.exists(outside.resolve("x")), "nothing was made through the link");
    }

    @Test
    void badParametersAreRefused() {
        assertCode(Status.Code.INVALID_ARGUMENT, () -> create("pvc-bad", Map.of("onDelete", "shred"), 0));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> create("pvc-bad", Map.of("mountPermissions", "4777"), 0));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> create("pvc-bad", Map.of("allocation", "full"), 0));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> cluster.controller().createVolume(request("pvc-bad", Map.of(), 0).toBuilder()
                .putParameters("server", "bad/server").build()));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> cluster.controller().createVolume(request("pvc-bad", Map.of(), 0).toBuilder()
                .clearVolumeCapabilities().addVolumeCapabilities(VolumeCapability.newBuilder()
                        .setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                        .setAccessMode(mode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER))).build()));
    }

    @Test
    void anExportThatIsNotMountedIsNeverWritten() throws Exception {
        Path unmounted = dir.resolve("exports/other.example/srv/share");
        assertCode(Status.Code.FAILED_PRECONDITION, () -> cluster.controller().createVolume(request("pvc-nomount", Map.of(), 0)
                .toBuilder().putParameters("server", "other.example").build()));
        assertFalse(Files.exists(unmounted), "the controller made nothing where no export is mounted");
    }

    @Test
    void publishingKeepsTheNodesForListVolumes() throws Exception {
        Volume volume = create("pvc-publish", Map.of(), 0);
        var publish = ControllerPublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setNodeId("node-a")
                .setVolumeCapability(capability(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER))
                .putAllVolumeContext(volume.getVolumeContextMap()).build();
        assertTrue(cluster.controller().controllerPublishVolume(publish).getPublishContextMap().isEmpty());
        cluster.controller().controllerPublishVolume(publish);
        assertEquals(List.of("node-a"), publishedNodes(volume.getVolumeId()));
        assertCode(Status.Code.NOT_FOUND, () -> cluster.controller().controllerPublishVolume(publish.toBuilder().setNodeId("node-z").build()));

        var unpublish = ControllerUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setNodeId("node-a").build();
        cluster.controller().controllerUnpublishVolume(unpublish);
        cluster.controller().controllerUnpublishVolume(unpublish);
        assertEquals(List.of(), publishedNodes(volume.getVolumeId()));
        delete(volume);
        assertCode(Status.Code.NOT_FOUND, () -> cluster.controller().controllerPublishVolume(publish));
    }

    @Test
    void aStaticVolumeIsKnownByItsVolumeContext() throws Exception {
        Files.createDirectories(exportData.resolve("static-data"));
        var publish = ControllerPublishVolumeRequest.newBuilder().setVolumeId("my-static-share").setNodeId("node-a")
                .setVolumeCapability(capability(VolumeCapability.AccessMode.Mode.MULTI_NODE_READER_ONLY))
                .putVolumeContext("server", SERVER).putVolumeContext("share", SHARE).putVolumeContext("subDir", "static-data").build();
        cluster.controller().controllerPublishVolume(publish);
        assertEquals(List.of("node-a"), publishedNodes("my-static-share"));
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId("my-static-share").setNodeId("node-a").build());
        assertFalse(listed("my-static-share"), "an unpublished static volume leaves no record");
        assertCode(Status.Code.NOT_FOUND, () -> cluster.controller().controllerPublishVolume(publish.toBuilder().clearVolumeContext().build()));
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("my-static-share").build());
        assertTrue(Files.isDirectory(exportData.resolve("static-data")), "DeleteVolume never touches a static volume's data");
    }

    @Test
    void capacityIsTheExportsFreeSpace() throws Exception {
        long available = cluster.controller().getCapacity(GetCapacityRequest.newBuilder()
                .putParameters("server", SERVER).putParameters("share", SHARE).build()).getAvailableCapacity();
        long free = Files.getFileStore(exportData).getUsableSpace();
        assertTrue(Math.abs(available - free) < (4L << 20), "GetCapacity " + available + " vs the export's free space " + free);
    }

    @Test
    void nodeStageMountsTheShareWithExactlyTheseArguments() throws Exception {
        Volume volume = create("pvc-stage", Map.of("mountPermissions", "0777"), 0);
        Path staging = cluster.kubeletDir("node-a", "nfs-staging");
        var stage = NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString())
                .setVolumeCapability(VolumeCapability.newBuilder()
                        .setMount(VolumeCapability.MountVolume.newBuilder().addMountFlags("nfsvers=4.1").addMountFlags("hard"))
                        .setAccessMode(mode(VolumeCapability.AccessMode.Mode.MULTI_NODE_READER_ONLY)))
                .putAllVolumeContext(volume.getVolumeContextMap()).build();
        Files.deleteIfExists(mountLog);
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> cluster.node("node-a").node().nodeStageVolume(stage));
        assertTrue(e.getStatus().getDescription().contains("no NFS client"), e.getStatus().toString());
        assertEquals(List.of("-t nfs -o nfsvers=4.1,hard,ro -- " + SERVER + ":" + SHARE + "/pvc-stage " + staging),
                Files.readAllLines(mountLog));
        assertTrue(SystemState.mountAt(staging).isEmpty(), "a failed mount leaves nothing mounted");

        // A static volume: its volume context, not its id, says where the share is.
        Files.deleteIfExists(mountLog);
        assertThrows(StatusRuntimeException.class, () -> cluster.node("node-a").node().nodeStageVolume(stage.toBuilder()
                .setVolumeId("hand-written-pv").clearVolumeContext()
                .putVolumeContext("server", "10.0.0.7").putVolumeContext("share", "/exports").build()));
        assertEquals(List.of("-t nfs -o nfsvers=4.1,hard,ro -- 10.0.0.7:/exports " + staging), Files.readAllLines(mountLog));
        delete(volume);
    }

    @Test
    void nodeCallsOnAShareThatIsNotMounted() throws Exception {
        Volume volume = create("pvc-node", Map.of(), 0);
        Path staging = cluster.kubeletDir("node-a", "nfs-node-staging");
        Path target = cluster.kubeletDir("node-a", "pod-nfs").resolve("mount");
        var node = cluster.node("node-a").node();
        assertCode(Status.Code.FAILED_PRECONDITION, () -> node.nodePublishVolume(NodePublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString()).setTargetPath(target.toString())
                .setVolumeCapability(capability(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER))
                .putAllVolumeContext(volume.getVolumeContextMap()).build()));
        assertCode(Status.Code.NOT_FOUND, () -> node.nodeGetVolumeStats(NodeGetVolumeStatsRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setVolumePath(staging.toString()).build()));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> node.nodeStageVolume(NodeStageVolumeRequest.newBuilder()
                .setVolumeId("static").setStagingTargetPath(staging.toString())
                .setVolumeCapability(capability(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER))
                .putVolumeContext("share", "/exports").build()));
        Files.createDirectories(target);
        for (int i = 0; i < 2; i++) {
            node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setTargetPath(target.toString()).build());
            node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).build());
        }
        assertFalse(Files.exists(target), "NodeUnpublishVolume removed the target path");
        delete(volume);
    }

    // --- helpers

    static Volume create(String name, Map<String, String> parameters, long bytes) {
        return cluster.controller().createVolume(request(name, parameters, bytes)).getVolume();
    }

    static CreateVolumeRequest request(String name, Map<String, String> parameters, long bytes) {
        Map<String, String> all = new HashMap<>(Map.of("server", SERVER, "share", SHARE));
        all.putAll(parameters);
        var request = CreateVolumeRequest.newBuilder().setName(name).putAllParameters(all)
                .addVolumeCapabilities(capability(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER));
        if (bytes > 0) {
            request.getCapacityRangeBuilder().setRequiredBytes(bytes);
        }
        return request.build();
    }

    static void delete(Volume volume) {
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
    }

    static VolumeCapability capability(VolumeCapability.AccessMode.Mode mode) {
        return VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance()).setAccessMode(mode(mode)).build();
    }

    static VolumeCapability.AccessMode mode(VolumeCapability.AccessMode.Mode mode) {
        return VolumeCapability.AccessMode.newBuilder().setMode(mode).build();
    }

    static List<String> publishedNodes(String volumeId) {
        return cluster.controller().listVolumes(ListVolumesRequest.getDefaultInstance()).getEntriesList().stream()
                .filter(entry -> entry.getVolume().getVolumeId().equals(volumeId))
                .findFirst().map(ListVolumesResponse.Entry::getStatus).map(status -> status.getPublishedNodeIdsList())
                .orElseThrow(() -> new AssertionError(volumeId + " is not listed"));
    }

    static boolean listed(String volumeId) {
        return cluster.controller().listVolumes(ListVolumesRequest.getDefaultInstance()).getEntriesList().stream()
                .anyMatch(entry -> entry.getVolume().getVolumeId().equals(volumeId));
    }

    static List<Path> trash() throws Exception {
        Path trash = exportData.resolve(".strata-csi/trash");
        if (!Files.isDirectory(trash)) {
            return List.of();
        }
        try (Stream<Path> files = Files.list(trash)) {
            return files.toList();
        }
    }

    static List<Path> listTree(Path root) throws Exception {
        try (Stream<Path> files = Files.walk(root)) {
            return files.filter(p -> !p.startsWith(root.resolve("node-a")) && !p.startsWith(root.resolve("controller"))).sorted().toList();
        }
    }

    static void assertCode(Status.Code code, org.junit.jupiter.api.function.Executable call) {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, call);
        assertEquals(code, e.getStatus().getCode(), e.getStatus().toString());
    }

    static void run(String... argv) throws Exception {
        Programs.run(argv);
    }
}
