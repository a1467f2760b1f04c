package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static dev.strata.csi.e2e.PipelineTest.mount;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeGroupSnapshotRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.VolumeGroupSnapshot;
import dev.strata.csi.deploy.CrashPoints;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * A group snapshot across two nodes with node-a's node-server killed at each of the group's crash
 * points (CrashPoints.group): the cut fails, node-b's filesystems are thawed at once by its agent
 * (the stream is gone), node-a's at its next start from its freeze records; the retried call then
 * cuts the whole group again, and its delete leaves no member on either node.
 */
@Tag("root")
class GroupSnapshotCrashTest {

    private static final String CRASHING = "node-a";

    @TempDir
    static Path dir;

    static Cluster cluster;
    private static List<SnapshotTest.Published> volumes;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, CRASHING, "node-b");
        PipelineTest.cluster = cluster;
        SnapshotTest.cluster = cluster;
        volumes = List.of(
                SnapshotTest.publish(CRASHING, SnapshotTest.create("pvc-crash-a1", 32 * MIB, mount("ext4"), CRASHING, null), mount("ext4")),
                SnapshotTest.publish(CRASHING, SnapshotTest.create("pvc-crash-a2", 32 * MIB, mount("xfs"), CRASHING, null), mount("xfs")),
                SnapshotTest.publish("node-b", SnapshotTest.create("pvc-crash-b1", 32 * MIB, mount("ext4"), "node-b", null), mount("ext4")));
    }

    @AfterAll
    static void stop() throws Exception {
        if (volumes != null) {
            volumes.forEach(SnapshotTest::delete);
        }
        PipelineTest.cluster = null;
        SnapshotTest.cluster = null;
        if (cluster != null) {
            cluster.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir));
    }

    @TestFactory
    Stream<DynamicTest> everyGroupCrashPointRecovers() {
        return Stream.of(CrashPoint.values()).filter(CrashPoints::group).map(point -> DynamicTest.dynamicTest(point.name(), () -> {
            cluster.restartNode(CRASHING, Cluster.Launch.HOST.with(Crashes.ENVIRONMENT, point.name()));
            String name = "group-" + point.name().toLowerCase().replace('_', '-');
            StatusRuntimeException failed = assertThrows(StatusRuntimeException.class, () -> group(name));
            assertEquals(Crashes.EXIT_STATUS, cluster.node(CRASHING).process().exitCode(), "killed at " + point + ": " + failed.getStatus());
            // node-b's agent thawed when the controller's stream went: writes go through now.
            SnapshotTest.writeNotFrozen(volumes.get(2).target().resolve(point.name()));

            cluster.restartNode(CRASHING);
            for (SnapshotTest.Published volume : volumes) { // thawed at node-a's start from its records
                SnapshotTest.writeNotFrozen(volume.target().resolve(point.name() + "-after"));
            }
            assertEquals(List.of(), frozenRecords(), "no freeze record left");

            VolumeGroupSnapshot group = retried(name);
            assertEquals(3, group.getSnapshotsCount());
            assertTrue(group.getReadyToUse());
            GroupSnapshotTest.deleteGroup(group);
            for (String node : List.of(CRASHING, "node-b")) {
                Path snapshots = cluster.node(node).pool().resolve("snapshots");
                if (Files.isDirectory(snapshots)) {
                    try (Stream<Path> files = Files.list(snapshots)) {
                        assertEquals(List.of(), files.toList(), "no orphan member on " + node + " after " + point);
                    }
                }
            }
            assertEquals(List.of(), SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder()).stream().map(Snapshot::getSnapshotId).toList(),
                    "no member listed after " + point + ":\n" + cluster.controllerProcess().output());
        }));
    }

    private static VolumeGroupSnapshot group(String name) {
        var request = CreateVolumeGroupSnapshotRequest.newBuilder().setName(name);
        volumes.forEach(volume -> request.addSourceVolumeIds(volume.volume().getVolumeId()));
        return cluster.groupController().createVolumeGroupSnapshot(request.build()).getGroupSnapshot();
    }

    /** As csi-snapshotter retries: while the controller waits for the restarted agent's report. */
    private static VolumeGroupSnapshot retried(String name) throws InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            try {
                return group(name);
            } catch (StatusRuntimeException e) {
                if (System.nanoTime() > deadline || (e.getStatus().getCode() != Status.Code.UNAVAILABLE
                        && e.getStatus().getCode() != Status.Code.ABORTED)) {
                    throw e;
                }
                Thread.sleep(500);
            }
        }
    }

    private static List<Path> frozenRecords() throws Exception {
        try (Stream<Path> files = Files.walk(cluster.node(CRASHING).pool())) {
            return files.filter(file -> file.toString().endsWith(".frozen")).toList();
        }
    }
}
