package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static dev.strata.csi.e2e.PipelineTest.mount;
import static dev.strata.csi.e2e.PipelineTest.on;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
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
import dev.strata.csi.testing.Progress;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestVolumeGroup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fault-injection suite on the LVM pool: node-server, with {@code --volume-group}, is killed
 * at each crash point the LVM pool reaches in its own steps (create, delete, attach, detach,
 * expand, thin snapshot and its delete, restore), then started again, and the call that was cut
 * short is repeated as the sidecar or kubelet would ({@link CrashedCalls}, as CrashRecoveryTest
 * does for the image pool). Whatever the point, the volume goes through the rest of its life: its
 * device-mapper device there while attached and gone after, no logical volume or record left
 * behind, and the data written before the crash reads back, from a restore of its snapshot too.
 * The stage and publish points are the node backend's, the same code for either pool: the image
 * pool's suite has them. Needs device-mapper: hack/lvm-vm.sh runs it in a VM (host processes only:
 * the container launch is the image pool suite's, and doubles an emulated VM's minutes).
 */
@Tag("root")
class LvmCrashRecoveryTest {

    private static final String NODE = "node-a";
    private static final long SIZE = 32 * MIB;
    private static final VolumeCapability CAPABILITY = mount("ext4");
    private static final Map<String, String> LVM = Map.of("pool", "lvm");

    @TempDir
    static Path dir;

    private static TestVolumeGroup group;
    private static Cluster cluster;
    private static CrashTally tally;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        tally = new CrashTally();
        group = TestVolumeGroup.make(dir, "strata-crash-" + ProcessHandle.current().pid(), "1G", "512m");
        // lvm2's commands take seconds in an emulated VM: calls to agents get a longer deadline than --agent-call-timeout's 5 s.
        cluster = Cluster.start(dir.resolve("cluster"), List.of("--agent-plaintext", "true"), List.of("--agent-call-timeout", "120s"),
                Map.of("VOLUME_GROUP", group.name(), "THIN_POOL", TestVolumeGroup.THIN_POOL), NODE);
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        System.out.printf("lvm: crash suite: %d crash points of the LVM pool, %d scenarios, %d kills, %d restarts, "
                + "%d retried calls, %.1f s%n", points().size(), tally.scenarios(), tally.kills(), tally.restarts(), tally.retries(),
                tally.seconds());
        // The cluster's directory only: the group's own loop device is in dir.
        assertEquals(List.of(), SystemState.cleanUp(dir.resolve("cluster")), "the suite left mounts or loop devices behind");
        if (group != null) {
            assertEquals(List.of(), group.driverVolumes(), "the suite left logical volumes behind");
            group.close();
        }
    }

    /**
     * The points of the LVM pool's own steps, or those of them {@code -Dstrata.lvm.crashPoints}
     * names (comma-separated): each scenario takes minutes in an emulated VM.
     */
    static List<CrashPoint> points() {
        List<String> named = List.of(System.getProperty("strata.lvm.crashPoints", "").split(",")).stream()
                .map(String::strip).filter(name -> !name.isEmpty()).toList();
        return Stream.of(CrashPoint.values())
                .filter(point -> named.isEmpty() || named.contains(point.name()))
                .filter(CrashPoints::lvmPool)
                .toList();
    }

    @TestFactory
    Stream<DynamicTest> everyCrashPointOfTheLvmPool() {
        List<CrashPoint> points = points();
        return points.stream().map(point -> DynamicTest.dynamicTest(point.toString(), () -> {
            new Scenario(point).run();
            Progress.line("lvm crash suite progress: %s recovered; %d of %d scenarios, %.0f s", point, tally.scenarios(),
                    points.size(), tally.seconds());
        }));
    }

    private static final class Scenario {

        private final CrashPoint point;
        private final String name;
        private final Path staging;
        private final Path target;
        private final boolean expands;
        private final boolean copies;
        private final CrashedCalls calls;
        private Volume volume;

        Scenario(CrashPoint point) throws Exception {
            this.point = point;
            this.name = "pvc-" + point.name().toLowerCase().replace('_', '-');
            this.staging = cluster.stagingPath(NODE, name);
            this.target = cluster.mountTarget(NODE, name);
            this.expands = point.name().startsWith("EXPAND");
            this.copies = point.name().startsWith("SNAPSHOT") || point.name().startsWith("RESTORE");
            this.calls = new CrashedCalls(cluster, NODE, point, Cluster.Launch.HOST, name, tally);
        }

        void run() throws Exception {
            tally.scenario();
            cluster.restartNode(NODE, Cluster.Launch.HOST.with(Crashes.ENVIRONMENT, point.name()));
            volume = create(name, null);
            expectActive(name, false);
            attach(volume);
            stagePublish(volume, staging, target);
            String checksum = writeData();
            if (expands) {
                expandOnline();
            }
            if (copies) {
                snapshotRestoreDelete(checksum);
            }
            unpublishUnstage(volume, staging, target);
            detach(volume);
            attach(volume);
            stagePublish(volume, staging, target);
            assertEquals(checksum, VolumeData.read(target.resolve("data")), name + ": the data written before the crash");
            unpublishUnstage(volume, staging, target);
            if (point != CrashPoint.DELETE_DETACHED) {
                detach(volume);
            } // else DeleteVolume meets the volume still active, unused: it deactivates it first
            delete(volume);
            assertTrue(calls.crashed(), "node-server never reached " + point + ":\n" + cluster.logs());
        }

        Volume create(String volumeName, VolumeContentSource source) throws Exception {
            CreateVolumeRequest.Builder request = CreateVolumeRequest.newBuilder()
                    .setName(volumeName)
                    .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(SIZE))
                    .addVolumeCapabilities(CAPABILITY)
                    .putAllParameters(LVM)
                    .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(on(NODE)).addRequisite(on(NODE)));
            if (source != null) {
                request.setVolumeContentSource(source);
            }
            Volume made = call("CreateVolume " + volumeName, () -> cluster.controller().createVolume(request.build())).getVolume();
            assertTrue(group.driverVolumes().contains(volumeName), name + ": the logical volume " + volumeName);
            return made;
        }

        void attach(Volume v) throws Exception {
            call("ControllerPublishVolume", () -> cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                    .setVolumeId(v.getVolumeId()).setNodeId(NODE).setVolumeCapability(CAPABILITY).build()));
            expectActive(nameOf(v), true);
        }

        void detach(Volume v) throws Exception {
            call("ControllerUnpublishVolume", () -> cluster.controller().controllerUnpublishVolume(
                    ControllerUnpublishVolumeRequest.newBuilder().setVolumeId(v.getVolumeId()).setNodeId(NODE).build()));
            expectActive(nameOf(v), false);
        }

        void stagePublish(Volume v, Path stagingPath, Path targetPath) throws Exception {
            call("NodeStageVolume", () -> node().nodeStageVolume(NodeStageVolumeRequest.newBuilder()
                    .setVolumeId(v.getVolumeId()).setStagingTargetPath(stagingPath.toString()).setVolumeCapability(CAPABILITY).build()));
            call("NodePublishVolume", () -> node().nodePublishVolume(NodePublishVolumeRequest.newBuilder()
                    .setVolumeId(v.getVolumeId()).setStagingTargetPath(stagingPath.toString()).setTargetPath(targetPath.toString())
                    .setVolumeCapability(CAPABILITY).build()));
            assertTrue(SystemState.mountAt(targetPath).isPresent(), name + ": published");
        }

        void unpublishUnstage(Volume v, Path stagingPath, Path targetPath) throws Exception {
            call("NodeUnpublishVolume", () -> node().nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(v.getVolumeId()).setTargetPath(targetPath.toString()).build()));
            call("NodeUnstageVolume", () -> node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder()
                    .setVolumeId(v.getVolumeId()).setStagingTargetPath(stagingPath.toString()).build()));
            assertTrue(SystemState.mountAt(stagingPath).isEmpty(), name + ": unstaged");
        }

        void delete(Volume v) throws Exception {
            call("DeleteVolume", () -> cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(v.getVolumeId()).build()));
            assertFalse(group.driverVolumes().contains(nameOf(v)), name + ": the logical volume removed");
            assertFalse(Files.exists(cluster.node(NODE).pool().resolve("lvm/" + group.name() + "/" + nameOf(v) + ".record")),
                    name + ": its record removed");
        }

        /** ControllerExpandVolume, then NodeExpandVolume on the published volume: lvextend, then ext4 grows online. */
        void expandOnline() throws Exception {
            long bigger = SIZE + 32 * MIB;
            long before = Files.getFileStore(target).getTotalSpace();
            call("ControllerExpandVolume", () -> cluster.controller().controllerExpandVolume(ControllerExpandVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setVolumeCapability(CAPABILITY)
                    .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(bigger)).build()));
            call("NodeExpandVolume", () -> node().nodeExpandVolume(NodeExpandVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setVolumePath(target.toString()).setStagingTargetPath(staging.toString())
                    .setVolumeCapability(CAPABILITY).setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(bigger)).build()));
            assertEquals(bigger, group.sizeBytes(name), name + ": the logical volume has the new size");
            assertTrue(Files.getFileStore(target).getTotalSpace() > before, name + ": ext4 grew");
        }

        /** A thin snapshot of the mounted volume, a restore of it read back, both deleted, each step retried after a crash. */
        void snapshotRestoreDelete(String checksum) throws Exception {
            String snapshotName = "snap-" + name;
            var snapshot = call("CreateSnapshot", () -> cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder()
                    .setName(snapshotName).setSourceVolumeId(volume.getVolumeId()).build())).getSnapshot();
            assertTrue(snapshot.getReadyToUse());
            assertTrue(group.driverVolumes().contains("snap." + snapshotName), name + ": the thin snapshot");
            Volume restored = create(name + "-r", VolumeContentSource.newBuilder().setSnapshot(
                    VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId())).build());
            Path restoredStaging = cluster.stagingPath(NODE, name + "-r");
            Path restoredTarget = cluster.mountTarget(NODE, name + "-r");
            attach(restored);
            stagePublish(restored, restoredStaging, restoredTarget);
            assertEquals(checksum, VolumeData.read(restoredTarget.resolve("data")), name + ": the restored volume holds the data");
            unpublishUnstage(restored, restoredStaging, restoredTarget);
            detach(restored);
            call("DeleteSnapshot", () -> cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder()
                    .setSnapshotId(snapshot.getSnapshotId()).build()));
            delete(restored);
            assertFalse(group.driverVolumes().contains("snap." + snapshotName), name + ": no snapshot left");
        }

        String writeData() throws Exception {
            return VolumeData.write(target.resolve("data"), MIB);
        }

        /** The volume's device-mapper device is there exactly while it is active (attached). */
        private void expectActive(String volumeName, boolean active) throws Exception {
            Path device = Path.of("/dev/mapper/" + group.name().replace("-", "--") + "-" + volumeName.replace("-", "--"));
            assertEquals(active, Files.exists(device), name + ": " + device + (active ? " while attached" : " once detached"));
        }

        private <T> T call(String rpc, Supplier<T> call) {
            return calls.call(rpc, call);
        }

        private static csi.v1.NodeGrpc.NodeBlockingStub node() {
            return cluster.node(NODE).node();
        }

        private static String nameOf(Volume v) {
            return v.getVolumeId().substring(v.getVolumeId().lastIndexOf('/') + 1);
        }
    }
}
