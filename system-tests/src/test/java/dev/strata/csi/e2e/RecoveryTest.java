package dev.strata.csi.e2e;

import com.google.protobuf.TextFormat;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Volume;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.node.NodeServer;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import static dev.strata.csi.e2e.PipelineTest.MIB;
import static dev.strata.csi.e2e.PipelineTest.create;
import static dev.strata.csi.e2e.PipelineTest.mount;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Crashes, reboots, leftovers and races: the node agent brings the kernel back to its records
 * at start, and concurrent calls never have a double effect.
 */
@Tag("root")
class RecoveryTest {

    @TempDir
    Path dir;

    private Cluster cluster;

    @BeforeEach
    void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, "node-a", "node-b");
        PipelineTest.cluster = cluster;
    }

    @AfterEach
    void stop() throws Exception {
        PipelineTest.cluster = null;
        if (cluster != null) {
            cluster.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir), "the test left mounts or loop devices behind");
    }

    @Test
    void afterACrashAndRebootAttachedImagesAreAttachedAgain() throws Exception {
        Volume volume = create("pvc-reboot", 32 * MIB, mount("ext4"), "node-a");
        Path image = cluster.node("node-a").pool().resolve("pvc-reboot.img");
        cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-a").setVolumeCapability(mount("ext4")).build());
        String before = SystemState.loopDevicesOf(image).getFirst();

        cluster.node("node-a").process().close(); // SIGKILL
        SystemState.run("losetup", "--detach", before); // the reboot forgets every loop device
        assertEquals(List.of(), SystemState.loopDevicesOf(image));

        Cluster.Node restarted = cluster.startNode("node-a");
        assertEquals(1, SystemState.loopDevicesOf(image).size(), "reattached at start:\n" + restarted.process().output());
        assertTrue(restarted.process().output().contains("reattached image"), restarted.process().output());

        Path staging = cluster.kubeletDir("node-a", "staging");
        restarted.node().nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setVolumeCapability(mount("ext4"))
                .putPublishContext("devicePath", before).build());
        assertEquals(SystemState.loopDevicesOf(image).getFirst(), SystemState.mountAt(staging).orElseThrow().source(),
                "staged from the device the pool knows, not the stale one in publish_context");
        restarted.node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).build());
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-a").build());
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        assertFalse(Files.exists(image));
    }

    /**
     * As a DaemonSet pod with the host's network comes back: the same address, a new process. The
     * controller must not reuse its channel to the one that died; the first call after the agent
     * registered again works.
     */
    @Test
    void anAgentRestartedAtTheSameAddressIsCalledAtOnce() throws Exception {
        Volume volume = create("pvc-same-address", 32 * MIB, mount("ext4"), "node-a");
        int port = cluster.agentPort("node-a");
        cluster.node("node-a").process().close(); // SIGKILL: connections to it die with it
        Cluster.Node restarted = cluster.startNode("node-a", Cluster.Launch.HOST, "127.0.0.1:" + port);
        assertEquals(port, cluster.agentPort("node-a"));
        String controllerLog = cluster.controllerProcess().output();
        assertEquals(2, controllerLog.split("msg=\"agent registered\" node=node-a address=127.0.0.1:" + port + " ", -1).length - 1,
                "both processes registered at the one address:\n" + controllerLog);

        // No retry: the call goes to the new process on a fresh channel.
        cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-a").setVolumeCapability(mount("ext4")).build());
        assertEquals(1, SystemState.loopDevicesOf(restarted.pool().resolve("pvc-same-address.img")).size());
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId("node-a").build());
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
    }

    @Test
    void leftoversOfInterruptedWorkAreFinishedAndStrangersLeftAlone() throws Exception {
        Path pool = cluster.node("node-b").pool();
        cluster.node("node-b").process().close();
        // An interrupted create: record says CREATING, the image is half made.
        writeRecord(pool, ImageRecord.newBuilder().setName("pvc-half").setCapacityBytes(8 * MIB)
                .setAllocation(ImageRecord.Allocation.SPARSE).setState(ImageRecord.State.CREATING).build());
        sparseFile(pool.resolve("pvc-half.img"), 8 * MIB);
        // An interrupted delete.
        writeRecord(pool, ImageRecord.newBuilder().setName("pvc-going").setCapacityBytes(8 * MIB)
                .setAllocation(ImageRecord.Allocation.SPARSE).setState(ImageRecord.State.DELETING).build());
        sparseFile(pool.resolve("pvc-going.img"), 8 * MIB);
        // A record write cut short, and a record damaged by hand.
        Files.writeString(pool.resolve("pvc-x.record.tmp"), "name: \"pvc-");
        Files.writeString(pool.resolve("pvc-garbled.record"), "this is not a record {");
        // A loop device on a pool file nobody has a record for, and the file itself.
        Path stranger = pool.resolve("stranger.img");
        sparseFile(stranger, 8 * MIB);
        SystemState.run("losetup", "--find", stranger.toString());
        assertEquals(1, SystemState.loopDevicesOf(stranger).size());

        Cluster.Node restarted = cluster.startNode("node-b");
        String log = restarted.process().output();
        assertFalse(Files.exists(pool.resolve("pvc-half.img")) || Files.exists(pool.resolve("pvc-half.record")), log);
        assertFalse(Files.exists(pool.resolve("pvc-going.img")) || Files.exists(pool.resolve("pvc-going.record")), log);
        assertFalse(Files.exists(pool.resolve("pvc-x.record.tmp")), log);
        assertTrue(Files.exists(pool.resolve("pvc-garbled.record")), "a record the agent cannot read is left for a person");
        assertTrue(log.contains("unreadable image record"), log);
        assertEquals(List.of(), SystemState.loopDevicesOf(stranger), "the unwanted loop device is detached:\n" + log);
        assertTrue(Files.exists(stranger), "a file without a record is never deleted");

        StatusRuntimeException refused = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class,
                () -> create("stranger", 8 * MIB, mount("ext4"), "node-b"));
        assertEquals(Status.Code.FAILED_PRECONDITION, refused.getStatus().getCode(), "node-b never overwrites the file");
        assertTrue(refused.getStatus().getDescription().contains("without a record"), refused.getStatus().getDescription());
    }

    /**
     * The driver attaches only images that are READY, but a person's losetup can hold any: an
     * interrupted create is then removed as a delete is, never while a loop device holds its image.
     */
    @Test
    void anInterruptedCreateHeldByAHandAttachedDeviceIsNotRemovedUnderIt() throws Exception {
        Path pool = cluster.node("node-b").pool();
        cluster.node("node-b").process().close();
        Path unused = pool.resolve("pvc-attached.img");
        writeRecord(pool, ImageRecord.newBuilder().setName("pvc-attached").setCapacityBytes(8 * MIB)
                .setAllocation(ImageRecord.Allocation.SPARSE).setState(ImageRecord.State.CREATING).build());
        sparseFile(unused, 8 * MIB);
        SystemState.run("losetup", "--find", unused.toString());
        Path held = pool.resolve("pvc-held.img");
        writeRecord(pool, ImageRecord.newBuilder().setName("pvc-held").setCapacityBytes(8 * MIB)
                .setAllocation(ImageRecord.Allocation.SPARSE).setState(ImageRecord.State.CREATING).build());
        sparseFile(held, 8 * MIB);
        SystemState.run("mkfs.ext4", "-q", held.toString());
        String device = SystemState.run("losetup", "--find", "--show", held.toString()).strip();
        Path mountPoint = Files.createDirectories(dir.resolve("by-hand"));
        SystemState.run("mount", device, mountPoint.toString());
        try {
            Cluster.Node restarted = cluster.startNode("node-b");
            String log = restarted.process().output();
            assertEquals(List.of(), SystemState.loopDevicesOf(unused), "the unused device is detached:\n" + log);
            assertFalse(Files.exists(unused) || Files.exists(pool.resolve("pvc-attached.record")), log);

            assertEquals(List.of(device), SystemState.loopDevicesOf(held), log);
            assertTrue(Files.exists(held) && Files.exists(pool.resolve("pvc-held.record")), "nothing removed under a mount:\n" + log);
            assertTrue(log.contains("cannot reconcile volume; left as it is") && log.contains(device + " is mounted at"), log);
            StatusRuntimeException refused = org.junit.jupiter.api.Assertions.assertThrows(StatusRuntimeException.class,
                    () -> create("pvc-held", 8 * MIB, mount("ext4"), "node-b"));
            assertEquals(Status.Code.FAILED_PRECONDITION, refused.getStatus().getCode(), refused.getStatus().toString());
            assertTrue(Files.exists(held), "the retried create does not remove it either");
        } finally {
            SystemState.run("umount", mountPoint.toString());
            SystemState.run("losetup", "--detach", device);
        }
        // Once the person lets go, the retried create makes the volume afresh.
        Volume made = create("pvc-held", 8 * MIB, mount("ext4"), "node-b");
        assertEquals(List.of(), SystemState.loopDevicesOf(held));
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(made.getVolumeId()).build());
        assertFalse(Files.exists(held));
    }

    @Test
    void aSecondAgentOnTheSamePoolRefusesToStart() throws Exception {
        Cluster.Node node = cluster.node("node-a");
        try (ServerProcess second = ServerProcess.start(NodeServer.class,
                "--endpoint", "unix://" + dir.resolve("second.sock"), "--node-id", "node-a2",
                "--pool-dir", node.pool().toString(), "--kubelet-dir", dir.toString(),
                "--controller-address", "127.0.0.1:" + cluster.registryPort(),
                "--agent-address", "127.0.0.1:0", "--agent-token-file", dir.resolve("agent-token").toString(),
                "--agent-plaintext", "true")) {
            assertEquals(1, second.exitCode(), second.output());
            assertTrue(second.output().contains("another node agent owns pool"), second.output());
        }
    }

    @Test
    void concurrentCreatesOfOneNameMakeOneVolume() throws Exception {
        ExecutorService callers = Executors.newFixedThreadPool(16);
        Set<String> ids = ConcurrentHashMap.newKeySet();
        List<Status.Code> codes = new ArrayList<>();
        try {
            List<Future<?>> calls = new ArrayList<>();
            for (int i = 0; i < 16; i++) {
                calls.add(callers.submit(() -> {
                    try {
                        ids.add(cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName("pvc-race")
                                .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(8 * MIB))
                                .addVolumeCapabilities(mount("ext4")).build()).getVolume().getVolumeId());
                        return Status.Code.OK;
                    } catch (StatusRuntimeException e) {
                        return e.getStatus().getCode();
                    }
                }));
            }
            for (Future<?> call : calls) {
                codes.add((Status.Code) call.get());
            }
        } finally {
            callers.shutdownNow();
        }
        assertTrue(codes.contains(Status.Code.OK), codes.toString());
        assertTrue(codes.stream().allMatch(code -> code == Status.Code.OK || code == Status.Code.ABORTED), codes.toString());
        assertEquals(1, ids.size(), "every successful call returned the same volume: " + ids);
        long images = 0;
        for (String nodeId : List.of("node-a", "node-b")) {
            try (var files = Files.list(cluster.node(nodeId).pool())) {
                images += files.filter(f -> f.toString().endsWith(".img")).count();
            }
        }
        assertEquals(1, images, "one image in the whole cluster");
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(ids.iterator().next()).build());
    }

    private static void writeRecord(Path pool, ImageRecord record) throws Exception {
        Files.writeString(pool.resolve(record.getName() + ".record"), TextFormat.printer().printToString(record));
    }

    private static void sparseFile(Path file, long bytes) throws Exception {
        try (RandomAccessFile out = new RandomAccessFile(file.toFile(), "rw")) {
            out.setLength(bytes);
        }
    }
}
