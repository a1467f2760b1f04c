package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodeGetCapabilitiesRequest;
import csi.v1.Csi.NodeGetVolumeStatsRequest;
import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * node-server against a real kernel NFS server it can stop and restart: a share used by two pods,
 * a server that stops answering under published volumes, and a server that comes back with
 * another filesystem id (stale handles). It needs an NFS client and server in the kernel, as
 * hack/nfs-vm.sh provides: STRATA_NFS_TEST_EXPORT (NFSv4 path) and STRATA_NFS_TEST_EXPORT_V3 name
 * the export, STRATA_NFS_TEST_SERVER a script that does {@code stop}, {@code start} and
 * {@code new-fsid} to the server. Elsewhere it is reported as skipped, never as passed.
 */
@Tag("root")
class NfsServerTest {

    static final Duration TIMEOUT = Duration.ofSeconds(5);
    /** Emulated machines are slow to start a process; an answer must still come near the deadline. */
    static final Duration SLACK = Duration.ofSeconds(10);

    static String export;
    static String exportV3;
    static String server;

    @TempDir
    Path dir;

    @BeforeAll
    static void needsServer() throws Exception {
        export = System.getenv().getOrDefault("STRATA_NFS_TEST_EXPORT", "");
        exportV3 = System.getenv().getOrDefault("STRATA_NFS_TEST_EXPORT_V3", "");
        server = System.getenv().getOrDefault("STRATA_NFS_TEST_SERVER", "");
        Assumptions.assumeTrue(!server.isEmpty(), "SKIPPED: STRATA_NFS_TEST_SERVER names no NFS server control script (hack/nfs-vm.sh sets it)");
        Root.require();
    }

    @ParameterizedTest
    @ValueSource(strings = {"4.2", "3"})
    void twoPodsShareAVolume(String version) throws Exception {
        try (Cluster cluster = cluster()) {
            var node = cluster.node("node-a").node();
            Path staging = cluster.kubeletDir("node-a", "staging");
            Path one = cluster.kubeletDir("node-a", "pod-1").resolve("mount");
            Path two = cluster.kubeletDir("node-a", "pod-2").resolve("mount");
            String share = version.equals("3") ? exportV3 : export;
            VolumeCapability capability = capability(version.equals("3") ? List.of("nfsvers=3", "nolock") : List.of("nfsvers=" + version));
            node.nodeStageVolume(stage("shared", staging, share, capability));
            node.nodePublishVolume(publish("shared", staging, one, share, capability));
            node.nodePublishVolume(publish("shared", staging, two, share, capability));
            var mount = SystemState.mountAt(one).orElseThrow();
            assertTrue(mount.options().contains("vers=" + version), mount.toString());
            String name = "pod-1-wrote-" + version;
            Files.writeString(one.resolve(name), "written through pod-1");
            assertEquals("written through pod-1", Files.readString(two.resolve(name)));
            Files.delete(two.resolve(name));
            assertFalse(Files.exists(one.resolve(name)));
            node.nodeUnpublishVolume(unpublish("shared", one));
            node.nodeUnpublishVolume(unpublish("shared", two));
            node.nodeUnstageVolume(unstage("shared", staging));
            assertEquals(List.of(), SystemState.mountsUnder(dir));
            System.out.println("nfs-vm: shared volume on NFSv" + version + ": written through one target, read through the other");
        } finally {
            SystemState.cleanUp(dir);
        }
    }

    @Test
    void aDeadServerCostsEachCallItsDeadlineAndLeavesNothing() throws Exception {
        try (Cluster cluster = cluster()) {
            var node = cluster.node("node-a").node();
            Path staging = cluster.kubeletDir("node-a", "staging");
            Path target = cluster.kubeletDir("node-a", "pod").resolve("mount");
            Path newStaging = cluster.kubeletDir("node-a", "staging-new");
            VolumeCapability capability = capability(List.of("nfsvers=4.2", "hard"));
            node.nodeStageVolume(stage("dead", staging, export, capability));
            node.nodePublishVolume(publish("dead", staging, target, export, capability));
            List<String> report = new ArrayList<>();
            control("stop");
            try {
                NodeGetVolumeStatsResponse stats = timed(report, "NodeGetVolumeStats", () -> node.nodeGetVolumeStats(
                        NodeGetVolumeStatsRequest.newBuilder().setVolumeId("dead").setVolumePath(target.toString()).build()));
                assertTrue(stats.getVolumeCondition().getAbnormal());
                assertEquals("NFS server 127.0.0.1 not responding", stats.getVolumeCondition().getMessage());

                StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> timed(report, "NodeStageVolume (new)",
                        () -> node.nodeStageVolume(stage("dead-new", newStaging, export, capability))));
                assertNotEquals(Status.Code.OK, e.getStatus().getCode());
                assertEquals(List.of(), SystemState.mountsUnder(newStaging), "the killed mount left nothing");
                assertFalse(ProcessHandle.allProcesses().anyMatch(p -> p.info().commandLine().orElse("").contains(newStaging.toString())),
                        "no mount process is left");

                assertCode(Status.Code.FAILED_PRECONDITION, () -> timed(report, "NodeUnstageVolume (still published)",
                        () -> node.nodeUnstageVolume(unstage("dead", staging))));
                assertFalse(SystemState.mountsUnder(staging).isEmpty(), "the share stays under the pod's bind");

                // Another call is served while one waits on the dead server.
                var waiting = Thread.ofPlatform().start(() -> node.nodeGetVolumeStats(
                        NodeGetVolumeStatsRequest.newBuilder().setVolumeId("dead").setVolumePath(staging.toString()).build()));
                timed(report, "NodeGetCapabilities (meanwhile)", () -> node.nodeGetCapabilities(NodeGetCapabilitiesRequest.getDefaultInstance()));
                waiting.join();

                timed(report, "NodeUnpublishVolume", () -> node.nodeUnpublishVolume(unpublish("dead", target)));
                assertFalse(Files.exists(target), "the target path is removed");
                timed(report, "NodeUnstageVolume", () -> node.nodeUnstageVolume(unstage("dead", staging)));
                assertEquals(List.of(), SystemState.mountsUnder(dir), "mounts left");
                long stuck = stuckThreads(cluster.node("node-a").process().pid());
                report.add("mounts left: none; node-server threads stuck in the kernel: " + stuck);
                assertEquals(0, stuck, "threads of node-server waiting in the kernel");
            } finally {
                control("start");
                report.forEach(line -> System.out.println("nfs-vm: dead server: " + line));
            }
        } finally {
            SystemState.cleanUp(dir);
        }
    }

    @Test
    void aStaleShareIsMountedAfreshByTheNextStageAndPublish() throws Exception {
        try (Cluster cluster = cluster()) {
            var node = cluster.node("node-a").node();
            Path staging = cluster.kubeletDir("node-a", "staging");
            Path target = cluster.kubeletDir("node-a", "pod").resolve("mount");
            VolumeCapability capability = capability(List.of("nfsvers=4.2"));
            node.nodeStageVolume(stage("stale", staging, export, capability));
            node.nodePublishVolume(publish("stale", staging, target, export, capability));
            Files.writeString(target.resolve("kept"), "before the restart");
            control("new-fsid");
            var statsRequest = NodeGetVolumeStatsRequest.newBuilder().setVolumeId("stale").setVolumePath(target.toString()).build();
            var stats = node.nodeGetVolumeStats(statsRequest);
            assertTrue(stats.getVolumeCondition().getAbnormal(), stats.toString());
            assertTrue(stats.getVolumeCondition().getMessage().contains("stale"), stats.toString());
            System.out.println("nfs-vm: stale share: NodeGetVolumeStats says " + stats.getVolumeCondition().getMessage());

            node.nodeStageVolume(stage("stale", staging, export, capability));
            node.nodePublishVolume(publish("stale", staging, target, export, capability));
            assertEquals("before the restart", Files.readString(target.resolve("kept")));
            assertFalse(node.nodeGetVolumeStats(statsRequest).getVolumeCondition().getAbnormal());
            assertEquals(1, SystemState.mountsUnder(target).size(), "the stale bind is gone, not stacked under the new one");
            System.out.println("nfs-vm: stale share: NodeStageVolume and NodePublishVolume mounted it afresh; the file is read back");
            Files.delete(target.resolve("kept"));
            node.nodeUnpublishVolume(unpublish("stale", target));
            node.nodeUnstageVolume(unstage("stale", staging));
            assertEquals(List.of(), SystemState.mountsUnder(dir));
        } finally {
            SystemState.cleanUp(dir);
        }
    }

    @Test
    void theControllerMountsTheExportAndTheNodeUsesItsVolumes() throws Exception {
        Path serverDir = Path.of(System.getenv().getOrDefault("STRATA_NFS_TEST_EXPORT_DIR", "/nonexistent"));
        Path exportRoot = dir.resolve("exports");
        try (Cluster cluster = Cluster.start(dir, List.of("--agent-plaintext", "true", "--nfs-timeout", "30s"),
                List.of("--nfs-export-root", exportRoot.toString(), "--nfs-mount-exports", "true"), Map.of(), "node-a")) {
            var created = cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName("pvc-real")
                    .putAllParameters(context(export))
                    .addVolumeCapabilities(capability(List.of())).build()).getVolume();
            assertTrue(Files.isDirectory(serverDir.resolve("pvc-real")), "CreateVolume made the directory on the server");
            var node = cluster.node("node-a").node();
            Path staging = cluster.kubeletDir("node-a", "staging");
            Path target = cluster.kubeletDir("node-a", "pod").resolve("mount");
            VolumeCapability capability = capability(List.of("nfsvers=4.2"));
            node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(created.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setVolumeCapability(capability)
                    .putAllVolumeContext(created.getVolumeContextMap()).build());
            node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(created.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability)
                    .putAllVolumeContext(created.getVolumeContextMap()).build());
            Files.writeString(target.resolve("data"), "from the pod");
            assertEquals("from the pod", Files.readString(serverDir.resolve("pvc-real/data")), "the pod wrote into the volume's directory");
            node.nodeUnpublishVolume(unpublish(created.getVolumeId(), target));
            node.nodeUnstageVolume(unstage(created.getVolumeId(), staging));
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(created.getVolumeId()).build());
            assertFalse(Files.exists(serverDir.resolve("pvc-real")), "DeleteVolume removed the directory on the server");
            System.out.println("nfs-vm: controller with --nfs-mount-exports true: created, used through the node, deleted");
        } finally {
            SystemState.cleanUp(dir);
        }
    }

    /**
     * Snapshot, restore and clone with controller-server mounting the export over NFSv4.2: the copy
     * goes through the NFS client (copy_file_range: a server-side copy), and what the server's
     * directory holds is compared file by file.
     */
    @Test
    void snapshotsRestoresAndClonesThroughARealNfsMount() throws Exception {
        Path serverDir = Path.of(System.getenv().getOrDefault("STRATA_NFS_TEST_EXPORT_DIR", "/nonexistent"));
        Path exportRoot = dir.resolve("exports");
        try (Cluster cluster = Cluster.start(dir, List.of("--agent-plaintext", "true", "--nfs-timeout", "60s"),
                List.of("--nfs-export-root", exportRoot.toString(), "--nfs-mount-exports", "true"), Map.of())) {
            var controller = cluster.controller();
            var parameters = context(export);
            String source = controller.createVolume(CreateVolumeRequest.newBuilder().setName("pvc-snap-source").putAllParameters(parameters)
                    .addVolumeCapabilities(capability(List.of("nfsvers=4.2"))).build()).getVolume().getVolumeId();
            Path data = serverDir.resolve("pvc-snap-source");
            NfsSnapshotTest.writeTree(data, 7);
            var atSnapshot = dev.strata.csi.testing.FileTrees.describe(data);
            long start = System.nanoTime();
            var snapshot = controller.createSnapshot(csi.v1.Csi.CreateSnapshotRequest.newBuilder().setName("snap-real")
                    .setSourceVolumeId(source).build()).getSnapshot();
            long took = (System.nanoTime() - start) / 1_000_000;
            NfsSnapshotTest.changeTree(data);
            var current = dev.strata.csi.testing.FileTrees.describe(data);
            String restored = controller.createVolume(CreateVolumeRequest.newBuilder().setName("pvc-snap-restored").putAllParameters(parameters)
                    .addVolumeCapabilities(capability(List.of())).setVolumeContentSource(NfsSnapshotTest.fromSnapshot(snapshot.getSnapshotId()))
                    .build()).getVolume().getVolumeId();
            String clone = controller.createVolume(CreateVolumeRequest.newBuilder().setName("pvc-snap-clone").putAllParameters(parameters)
                    .addVolumeCapabilities(capability(List.of())).setVolumeContentSource(NfsSnapshotTest.fromVolume(source))
                    .build()).getVolume().getVolumeId();
            assertEquals(atSnapshot, dev.strata.csi.testing.FileTrees.describe(serverDir.resolve("pvc-snap-restored")));
            assertEquals(current, dev.strata.csi.testing.FileTrees.describe(serverDir.resolve("pvc-snap-clone")));
            for (String volume : List.of(source, restored, clone)) {
                controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume).build());
            }
            controller.deleteSnapshot(csi.v1.Csi.DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
            assertEquals(List.of(), dev.strata.csi.testing.FileTrees.list(serverDir.resolve(".strata-csi/snapshots")));
            System.out.println("nfs-vm: snapshot over NFSv4.2 in " + took + " ms; restored and cloned file by file; nothing left");
        } finally {
            SystemState.cleanUp(dir);
        }
    }

    // --- helpers

    Cluster cluster() throws Exception {
        return Cluster.start(dir, List.of("--agent-plaintext", "true", "--nfs-timeout", TIMEOUT.toSeconds() + "s"), "node-a");
    }

    static <T> T timed(List<String> report, String call, Callable<T> work) throws Exception {
        long start = System.nanoTime();
        String answer = "OK";
        try {
            return work.call();
        } catch (StatusRuntimeException e) {
            answer = e.getStatus().getCode() + " (" + e.getStatus().getDescription() + ")";
            throw e;
        } finally {
            Duration took = Duration.ofNanos(System.nanoTime() - start);
            report.add(call + ": " + answer + " in " + took.toMillis() + " ms");
            assertTrue(took.compareTo(TIMEOUT.plus(SLACK)) < 0, call + " answered within the deadline, took " + took.toMillis() + " ms");
        }
    }

    /** Threads of the process in uninterruptible sleep (state D): waiting in the kernel, as on a dead NFS server. */
    static long stuckThreads(long pid) throws Exception {
        long stuck = 0;
        try (var tasks = Files.list(Path.of("/proc/" + pid + "/task"))) {
            for (Path task : tasks.toList()) {
                String stat = Files.readString(task.resolve("stat"));
                if (stat.substring(stat.lastIndexOf(')') + 2).startsWith("D")) {
                    stuck++;
                }
            }
        }
        return stuck;
    }

    static void control(String action) throws Exception {
        Process process = new ProcessBuilder(server, action).inheritIO().start();
        assertTrue(process.waitFor(120, TimeUnit.SECONDS), "NFS server " + action + " finished");
        assertEquals(0, process.exitValue(), "NFS server " + action);
    }

    static void assertCode(Status.Code code, org.junit.jupiter.api.function.Executable call) {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, call);
        assertEquals(code, e.getStatus().getCode(), e.getStatus().toString());
    }

    static VolumeCapability capability(List<String> flags) {
        return VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.newBuilder().addAllMountFlags(flags))
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER))
                .build();
    }

    static Map<String, String> context(String share) {
        return Map.of("server", share.substring(0, share.indexOf(":/")), "share", share.substring(share.indexOf(":/") + 1));
    }

    static NodeStageVolumeRequest stage(String id, Path staging, String share, VolumeCapability capability) {
        return NodeStageVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(staging.toString())
                .setVolumeCapability(capability).putAllVolumeContext(context(share)).build();
    }

    static NodePublishVolumeRequest publish(String id, Path staging, Path target, String share, VolumeCapability capability) {
        return NodePublishVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(staging.toString())
                .setTargetPath(target.toString()).setVolumeCapability(capability).putAllVolumeContext(context(share)).build();
    }

    static NodeUnpublishVolumeRequest unpublish(String id, Path target) {
        return NodeUnpublishVolumeRequest.newBuilder().setVolumeId(id).setTargetPath(target.toString()).build();
    }

    static NodeUnstageVolumeRequest unstage(String id, Path staging) {
        return NodeUnstageVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(staging.toString()).build();
    }

}
