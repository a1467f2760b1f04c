package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static dev.strata.csi.e2e.PipelineTest.mount;
import static dev.strata.csi.e2e.PipelineTest.on;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.ControllerExpandVolumeRequest;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodeExpandVolumeRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.deploy.CrashPoints;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.Progress;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fault-injection suite: node-server is killed at every {@link CrashPoint}, once as a host
 * process and once as a container (its mount namespace dies with it), then started again, and the
 * call that was cut short is repeated as the sidecar or kubelet would. Whatever the point, the
 * volume goes through the rest of its life: one loop device while attached and none after, no
 * device, mount, image or record left behind, and the data written before the crash reads back.
 */
@Tag("root")
class CrashRecoveryTest {

    private static final String NODE = "node-a";
    private static final long SIZE = 32 * MIB;
    private static final VolumeCapability CAPABILITY = mount("ext4");

    @TempDir
    static Path dir;

    private static Cluster cluster;
    private static CrashTally tally;
    private static int checks;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        tally = new CrashTally();
        cluster = Cluster.start(dir, NODE);
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        // The report only: hack/test.sh prints this line from there at its end.
        System.out.printf("crash suite: %d crash points, %d scenarios, %d kills, %d restarts, %d retried calls, "
                        + "%d invariant checks, %.1f s%n", points().size(), tally.scenarios(), tally.kills(), tally.restarts(),
                tally.retries(), checks, tally.seconds());
        assertEquals(List.of(), SystemState.cleanUp(dir), "the suite left mounts or loop devices behind");
    }

    /** The points of one node: not those of copies between nodes, nor those of encryption. */
    static List<CrashPoint> points() {
        return Stream.of(CrashPoint.values())
                .filter(CrashPoints::oneNode)
                .toList();
    }

    @TestFactory
    Stream<DynamicTest> everyCrashPointAsAHostProcessAndAsAContainer() {
        List<CrashPoint> points = points();
        int total = 2 * points.size();
        return Stream.of(Cluster.Launch.HOST, Cluster.Launch.CONTAINER).flatMap(launch -> points.stream()
                .map(point -> DynamicTest.dynamicTest(point + where(launch), () -> {
                    new Scenario(point, launch).run();
                    // A line per operation's batch of points (a few seconds each): the suite runs for minutes.
                    int next = points.indexOf(point) + 1;
                    if (next == points.size() || !batch(points.get(next)).equals(batch(point))) {
                        Progress.line("crash suite progress: %s crash points%s recovered; %d of %d scenarios, %.0f s",
                                batch(point), where(launch), tally.scenarios(), total, tally.seconds());
                    }
                })));
    }

    /** The operation a crash point belongs to: CREATE, DELETE, ATTACH, ... */
    private static String batch(CrashPoint point) {
        return point.name().split("_")[0];
    }

    private static String where(Cluster.Launch launch) {
        return launch.container() ? " in a container" : " as a host process";
    }

    /** A node reboot: every loop device and mount gone behind the driver's back; kubelet stages and publishes again. */
    @Test
    void afterARebootKubeletsRetriedStageAndPublishFindTheData() throws Exception {
        Scenario volume = new Scenario(null, Cluster.Launch.CONTAINER);
        volume.createAttachStagePublish();
        String checksum = volume.writeData();
        cluster.node(NODE).process().close();

        SystemState.run("umount", volume.target.toString());
        SystemState.run("umount", volume.staging.toString());
        for (String device : SystemState.loopDevicesHolding(volume.image())) {
            SystemState.run("losetup", "--detach", device);
        }
        assertEquals(List.of(), SystemState.loopDevicesHolding(volume.image()));
        assertEquals(List.of(), mountsBelowKubelet());

        Cluster.Node node = cluster.startNode(NODE, Cluster.Launch.CONTAINER);
        tally.restarted();
        assertEquals(1, SystemState.loopDevicesHolding(volume.image()).size(), "reattached at start:\n" + node.process().output());
        volume.stagePublish();
        assertEquals(checksum, volume.readData());
        volume.unpublishUnstageDetachDelete();
    }

    /** The volume of one scenario, and the calls kubelet and the sidecars make for it. */
    private static final class Scenario {

        private final CrashPoint point;
        private final Cluster.Launch launch;
        private final String name;
        private final Path staging;
        private final Path target;
        /** The expansion points grow an xfs volume: ext4's online resize needs CAP_SYS_RESOURCE, which this sandbox withholds. */
        private final boolean expands;
        /** The snapshot and restore points (and the freeze): a snapshot of the mounted volume, restored, both deleted. */
        private final boolean copies;
        private final VolumeCapability capability;
        private final long size;
        private final CrashedCalls calls;
        private Volume volume;

        Scenario(CrashPoint point, Cluster.Launch launch) throws Exception {
            this.point = point;
            this.launch = launch;
            this.name = "pvc-" + (point == null ? "reboot" : point.name().toLowerCase().replace('_', '-'))
                    + (launch.container() ? "-c" : "-h");
            this.staging = cluster.stagingPath(NODE, name);
            this.target = cluster.mountTarget(NODE, name);
            this.expands = point != null && point.name().contains("EXPAND");
            this.copies = point != null && (point.name().startsWith("SNAPSHOT") || point.name().startsWith("RESTORE")
                    || point == CrashPoint.FROZEN);
            this.capability = expands ? mount("xfs") : CAPABILITY;
            this.size = expands ? 320 * MIB : SIZE;
            this.calls = new CrashedCalls(cluster, NODE, point, launch, name, tally);
        }

        void run() throws Exception {
            tally.scenario();
            cluster.restartNode(NODE, launch.with(Crashes.ENVIRONMENT, point.name()));
            createAttachStagePublish();
            String checksum = writeData();
            if (expands) {
                expandOnline();
            }
            if (copies) {
                snapshotRestoreDelete(checksum);
            }
            call("NodeUnpublishVolume", () -> node().nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setTargetPath(target.toString()).build()));
            assertFalse(Files.exists(target), "unpublish removes the target");
            expectDevices(1);
            call("NodeUnstageVolume", () -> node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString()).build()));
            expectDevices(1);
            call("ControllerUnpublishVolume", () -> cluster.controller().controllerUnpublishVolume(
                    ControllerUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setNodeId(NODE).build()));
            expectDevices(0);
            // The volume again, through every phase: what was written before any crash is there.
            attach();
            stagePublish();
            assertEquals(checksum, readData(), "the data written before the crash");
            unpublishUnstageDetachDelete();
            assertTrue(calls.crashed(), "node-server never reached " + point + ":\n" + cluster.logs());
        }

        void createAttachStagePublish() throws Exception {
            volume = call("CreateVolume", () -> cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                    .setName(name)
                    .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(size))
                    .addVolumeCapabilities(capability)
                    .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(on(NODE)).addRequisite(on(NODE)))
                    .build())).getVolume();
            expectDevices(0);
            attach();
            stagePublish();
        }

        void attach() {
            call("ControllerPublishVolume", () -> cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId(NODE).setVolumeCapability(capability).build()));
            expectDevices(1);
        }

        void stagePublish() throws Exception {
            call("NodeStageVolume", () -> node().nodeStageVolume(NodeStageVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build()));
            expectDevices(1);
            assertTrue(SystemState.mountAt(staging).isPresent(), "staged");
            call("NodePublishVolume", () -> node().nodePublishVolume(NodePublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString()).setTargetPath(target.toString())
                    .setVolumeCapability(capability).build()));
            expectDevices(1);
            assertTrue(SystemState.mountAt(target).isPresent(), "published");
        }

        void unpublishUnstageDetachDelete() {
            call("NodeUnpublishVolume", () -> node().nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setTargetPath(target.toString()).build()));
            call("NodeUnstageVolume", () -> node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString()).build()));
            if (point != CrashPoint.DELETE_DETACHED) {
                call("ControllerUnpublishVolume", () -> cluster.controller().controllerUnpublishVolume(
                        ControllerUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setNodeId(NODE).build()));
                expectDevices(0);
            } // else DeleteVolume meets the volume still attached, unused: it detaches first
            call("DeleteVolume", () -> cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).build()));
            Path pool = cluster.node(NODE).pool();
            checks++;
            assertFalse(Files.exists(image()), "image removed");
            assertFalse(Files.exists(pool.resolve(name + ".record")), "record removed");
            try {
                assertEquals(List.of(), SystemState.loopDevicesOfFileNamed(name + ".img"), "no loop device left on the deleted image");
                assertEquals(List.of(), mountsBelowKubelet(), "no mount left");
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        }

        /** ControllerExpandVolume, then NodeExpandVolume on the published volume, as external-resizer and kubelet call them. */
        void expandOnline() throws Exception {
            long bigger = size + 64 * MIB;
            long totalBefore = Files.getFileStore(target).getTotalSpace();
            var controller = call("ControllerExpandVolume", () -> cluster.controller().controllerExpandVolume(
                    ControllerExpandVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setVolumeCapability(capability)
                            .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(bigger)).build()));
            assertEquals(bigger, controller.getCapacityBytes());
            assertTrue(controller.getNodeExpansionRequired());
            expectDevices(1);
            var node = call("NodeExpandVolume", () -> node().nodeExpandVolume(NodeExpandVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setVolumePath(target.toString()).setStagingTargetPath(staging.toString())
                    .setVolumeCapability(capability)
                    .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(bigger)).build()));
            assertEquals(bigger, node.getCapacityBytes());
            checks++;
            assertEquals(bigger, Files.size(image()), "the image has the new size");
            long total = Files.getFileStore(target).getTotalSpace();
            assertEquals(totalBefore + 64 * MIB, total, name + ": the filesystem grew by the 64 MiB the volume did");
        }

        /**
         * CreateSnapshot of the mounted volume (its filesystem frozen for the copy), CreateVolume
         * from the snapshot, DeleteSnapshot, DeleteVolume of the restore, each retried after a
         * crash: the volume is writable afterwards (never left frozen), the restored image is a
         * clean ext4 holding the data, and no snapshot, partial copy or freeze record is left.
         */
        void snapshotRestoreDelete(String checksum) throws Exception {
            String snapshotName = "snap-" + name;
            var snapshot = call("CreateSnapshot", () -> cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder()
                    .setName(snapshotName).setSourceVolumeId(volume.getVolumeId()).build())).getSnapshot();
            checks++;
            assertTrue(snapshot.getReadyToUse());
            writeNotFrozen();
            Path pool = cluster.node(NODE).pool();
            checks++;
            assertEquals(List.of(pool.resolve("snapshots/" + snapshotName + ".img"), pool.resolve("snapshots/" + snapshotName + ".record")),
                    snapshotFiles(), "the snapshot, and nothing partial");

            String restoredName = name + "-r";
            Volume restored = call("CreateVolume from the snapshot", () -> cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                    .setName(restoredName)
                    .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(size))
                    .addVolumeCapabilities(capability)
                    .setVolumeContentSource(VolumeContentSource.newBuilder().setSnapshot(
                            VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId())))
                    .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(on(NODE)).addRequisite(on(NODE)))
                    .build())).getVolume();
            Path restoredImage = pool.resolve(restoredName + ".img");
            checks++;
            var fsck = Programs.execute("e2fsck", "-fn", restoredImage.toString());
            assertEquals(0, fsck.status(), name + ": the restored filesystem is clean without journal replay\n" + fsck.output());
            Path dumped = dir.resolve(restoredName + ".data");
            Programs.run("debugfs", "-R", "dump /data " + dumped, restoredImage.toString());
            checks++;
            assertEquals(checksum, VolumeData.read(dumped), name + ": the restored volume holds the data");
            Files.delete(dumped);

            call("DeleteSnapshot", () -> cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder()
                    .setSnapshotId(snapshot.getSnapshotId()).build()));
            call("DeleteVolume of the restore", () -> cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder()
                    .setVolumeId(restored.getVolumeId()).build()));
            checks++;
            assertEquals(List.of(), snapshotFiles(), "no snapshot left");
            assertFalse(Files.exists(restoredImage), "the restore deleted");
            try (Stream<Path> frozen = Files.list(pool)) {
                assertEquals(List.of(), frozen.filter(file -> file.toString().endsWith(".frozen")).toList(), "no freeze recorded");
            }
        }

        private List<Path> snapshotFiles() throws Exception {
            Path snapshots = cluster.node(NODE).pool().resolve("snapshots");
            if (!Files.isDirectory(snapshots)) {
                return List.of();
            }
            try (Stream<Path> files = Files.list(snapshots)) {
                return files.sorted().toList();
            }
        }

        /** A write to the volume completes: its filesystem is not frozen (a frozen one would block it). */
        void writeNotFrozen() throws Exception {
            checks++;
            java.util.concurrent.CompletableFuture.runAsync(() -> {
                try {
                    Files.writeString(target.resolve("after-snapshot"), "written");
                    SystemState.run("sync", target.resolve("after-snapshot").toString());
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }).get(30, java.util.concurrent.TimeUnit.SECONDS);
        }

        String writeData() throws Exception {
            return VolumeData.write(target.resolve("data"), MIB);
        }

        String readData() throws Exception {
            return VolumeData.read(target.resolve("data"));
        }

        Path image() {
            return cluster.node(NODE).pool().resolve(name + ".img");
        }

        private csi.v1.NodeGrpc.NodeBlockingStub node() {
            return cluster.node(NODE).node();
        }

        /** Exactly {@code count} loop devices hold the image: never two. */
        private void expectDevices(int count) {
            checks++;
            try {
                assertEquals(count, SystemState.loopDevicesHolding(image()).size(), name + ": loop devices on the image\n" + cluster.logs());
            } catch (Exception e) {
                throw new AssertionError(e);
            }
        }

        private <T> T call(String rpc, Supplier<T> call) {
            return calls.call(rpc, call);
        }
    }

    /** Mounts below kubelet's directory, but for the shared mount of the directory itself. */
    private static List<Path> mountsBelowKubelet() throws Exception {
        Path kubelet = dir.toRealPath().resolve(NODE + "/kubelet");
        return SystemState.mountsUnder(kubelet).stream().filter(mount -> !mount.equals(kubelet)).toList();
    }
}
