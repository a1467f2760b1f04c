package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.ControllerGetVolumeRequest;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One node-server stopped with SIGSTOP: its process holds its sockets and its lease is fresh, but
 * it answers nothing, as a node whose kernel is stuck or whose pool sits under a hung mount. Every
 * call about the other node answers within 5 s, from the controller's index and that node alone;
 * ControllerGetVolume and ListSnapshots' filters of either node's volumes too, from the index;
 * calls that need the stopped node fail UNAVAILABLE, naming it, within the agent deadline (and at
 * once after the first), and succeed once it is continued.
 */
@Tag("root")
class StoppedNodeTest {

    static final long MIB = 1 << 20;
    static final Duration PROMPT = Duration.ofSeconds(5);
    /** The controller's default --agent-call-timeout, and a margin for the call around it. */
    static final Duration AGENT_DEADLINE = Duration.ofSeconds(5);

    @TempDir
    Path dir;

    @AfterEach
    void nothingLeftBehind() throws Exception {
        assertEquals(List.of(), SystemState.cleanUp(dir), "the test left mounts or loop devices behind");
    }

    @Test
    void aStoppedNodeHoldsUpNoCallAboutAnotherNode() throws Exception {
        Root.require();
        VolumeCapability ext4 = PipelineTest.mount("ext4");
        try (Cluster cluster = Cluster.start(dir.resolve("cluster"), "node-a", "node-b")) {
            SnapshotTest.cluster = cluster;
            PipelineTest.cluster = cluster;
            Volume onB = SnapshotTest.create("pvc-on-b", 64 * MIB, ext4, "node-b", null);
            long pid = cluster.node("node-b").process().pid();
            SystemState.run("kill", "-STOP", Long.toString(pid));
            try {
                Volume onA = prompt("CreateVolume on node-a", () -> SnapshotTest.create("pvc-on-a", 64 * MIB, ext4, "node-a", null));
                var published = prompt("ControllerPublishVolume and NodeStage on node-a",
                        () -> SnapshotTest.publish("node-a", onA, ext4));
                assertTrue(SystemState.mountAt(published.staging()).isPresent(), "staged on node-a");
                // The agent pushes the change at once: this replica's index lists node-a as published within a round trip.
                long listed = System.nanoTime() + Duration.ofSeconds(2).toNanos();
                while (!cluster.controller().controllerGetVolume(ControllerGetVolumeRequest.newBuilder().setVolumeId(onA.getVolumeId())
                        .build()).getStatus().getPublishedNodeIdsList().equals(List.of("node-a"))) {
                    assertTrue(System.nanoTime() < listed, "ControllerGetVolume names node-a as published within 2 s");
                    Thread.sleep(50);
                }
                Snapshot snapshot = prompt("CreateSnapshot on node-a", () -> SnapshotTest.snapshot("snap-on-a", onA));
                Volume restored = prompt("a restore on node-a",
                        () -> SnapshotTest.create("pvc-restored-on-a", 0, ext4, "node-a", SnapshotTest.from(snapshot)));
                assertEquals("local/node-a/pvc-restored-on-a", restored.getVolumeId());
                var volumes = prompt("ListVolumes", () -> cluster.controller().listVolumes(ListVolumesRequest.getDefaultInstance()));
                assertEquals(List.of("local/node-a/pvc-on-a", "local/node-a/pvc-restored-on-a", "local/node-b/pvc-on-b"),
                        volumes.getEntriesList().stream().map(entry -> entry.getVolume().getVolumeId()).sorted().toList(),
                        "node-b's volume listed from the index, without asking node-b");
                List<String> paged = new java.util.ArrayList<>();
                String token = "";
                do { // in pages of one, each from the index's order; node-b is not asked
                    String from = token;
                    var page = prompt("a page of ListVolumes", () -> cluster.controller().listVolumes(
                            ListVolumesRequest.newBuilder().setMaxEntries(1).setStartingToken(from).build()));
                    page.getEntriesList().forEach(entry -> paged.add(entry.getVolume().getVolumeId()));
                    token = page.getNextToken();
                } while (!token.isEmpty());
                assertEquals(volumes.getEntriesList().stream().map(entry -> entry.getVolume().getVolumeId()).sorted().toList(), paged);
                var notIssued = assertThrows(StatusRuntimeException.class, () -> cluster.controller().listVolumes(
                        ListVolumesRequest.newBuilder().setMaxEntries(1).setStartingToken("local/node-a/pvc-on-a").build()));
                assertEquals(Status.Code.ABORTED, notIssued.getStatus().getCode());
                var snapshots = prompt("ListSnapshots", () -> cluster.controller().listSnapshots(ListSnapshotsRequest.getDefaultInstance()));
                assertEquals(List.of(snapshot.getSnapshotId()),
                        snapshots.getEntriesList().stream().map(entry -> entry.getSnapshot().getSnapshotId()).toList());
                var ofSource = prompt("ListSnapshots of one source volume", () -> cluster.controller().listSnapshots(
                        ListSnapshotsRequest.newBuilder().setSourceVolumeId(onA.getVolumeId()).setMaxEntries(1).build()));
                assertEquals(List.of(snapshot.getSnapshotId()),
                        ofSource.getEntriesList().stream().map(entry -> entry.getSnapshot().getSnapshotId()).toList());
                var byId = prompt("ListSnapshots of one id", () -> cluster.controller().listSnapshots(
                        ListSnapshotsRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build()));
                assertEquals(snapshot.getSourceVolumeId(), byId.getEntries(0).getSnapshot().getSourceVolumeId());
                // ControllerGetVolume from the index: node-b's volume too, without asking node-b.
                var gotA = prompt("ControllerGetVolume on node-a", () -> cluster.controller().controllerGetVolume(
                        ControllerGetVolumeRequest.newBuilder().setVolumeId(onA.getVolumeId()).build()));
                assertEquals(onA.getVolumeId(), gotA.getVolume().getVolumeId());
                assertEquals(onA.getCapacityBytes(), gotA.getVolume().getCapacityBytes());
                var gotB = prompt("ControllerGetVolume on node-b", () -> cluster.controller().controllerGetVolume(
                        ControllerGetVolumeRequest.newBuilder().setVolumeId(onB.getVolumeId()).build()));
                assertEquals(List.of(), gotB.getStatus().getPublishedNodeIdsList(), "node-b's volume is not published");
                var none = assertThrows(StatusRuntimeException.class, () -> cluster.controller().controllerGetVolume(
                        ControllerGetVolumeRequest.newBuilder().setVolumeId("local/node-b/pvc-never-made").build()));
                assertEquals(Status.Code.NOT_FOUND, none.getStatus().getCode(), none.getStatus().toString());
                long capacity = prompt("GetCapacity of node-a", () -> cluster.controller().getCapacity(GetCapacityRequest.newBuilder()
                        .setAccessibleTopology(PipelineTest.on("node-a")).build()).getAvailableCapacity());
                assertTrue(capacity > 0, "node-a has room: " + capacity);
                prompt("DeleteVolume on node-a", () -> {
                    SnapshotTest.deleteVolume(restored);
                    return null;
                });

                // Calls that need node-b: UNAVAILABLE naming it, within the agent deadline, then at once.
                ControllerPublishVolumeRequest attachB = ControllerPublishVolumeRequest.newBuilder()
                        .setVolumeId(onB.getVolumeId()).setNodeId("node-b").setVolumeCapability(ext4).build();
                long started = System.nanoTime();
                var first = assertThrows(StatusRuntimeException.class, () -> cluster.controller().controllerPublishVolume(attachB));
                Duration took = Duration.ofNanos(System.nanoTime() - started);
                assertEquals(Status.Code.UNAVAILABLE, first.getStatus().getCode(), first.getStatus().toString());
                assertTrue(first.getStatus().getDescription().contains("node-b"), first.getStatus().getDescription());
                assertTrue(took.compareTo(AGENT_DEADLINE.plusSeconds(2)) < 0, "within the agent deadline: " + took);
                started = System.nanoTime();
                var again = assertThrows(StatusRuntimeException.class, () -> cluster.controller().createSnapshot(
                        CreateSnapshotRequest.newBuilder().setName("snap-on-b").setSourceVolumeId(onB.getVolumeId()).build()));
                took = Duration.ofNanos(System.nanoTime() - started);
                assertEquals(Status.Code.UNAVAILABLE, again.getStatus().getCode(), again.getStatus().toString());
                assertTrue(again.getStatus().getDescription().contains("node-b"), again.getStatus().getDescription());
                assertTrue(took.compareTo(Duration.ofSeconds(1)) < 0, "a marked node fails at once: " + took);

                // node-a still answers at once while node-b is marked.
                prompt("DeleteSnapshot and cleanup on node-a", () -> {
                    SnapshotTest.deleteSnapshot(snapshot);
                    SnapshotTest.delete(published);
                    return null;
                });
            } finally {
                SystemState.run("kill", "-CONT", Long.toString(pid));
            }
            // Continued: it renews, answers the probe, and calls that need it succeed.
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            while (true) {
                try {
                    var published = SnapshotTest.publish("node-b", onB, ext4);
                    SnapshotTest.delete(published);
                    break;
                } catch (StatusRuntimeException e) {
                    if (e.getStatus().getCode() != Status.Code.UNAVAILABLE || System.nanoTime() > deadline) {
                        throw new AssertionError("node-b continued but its calls still fail:\n" + cluster.logs(), e);
                    }
                    Thread.sleep(250);
                }
            }
        } finally {
            SnapshotTest.cluster = null;
            PipelineTest.cluster = null;
        }
    }

    /** Runs {@code call} and checks it answered within {@link #PROMPT}. */
    static <T> T prompt(String what, Callable<T> call) throws Exception {
        long started = System.nanoTime();
        T result = call.call();
        Duration took = Duration.ofNanos(System.nanoTime() - started);
        assertTrue(took.compareTo(PROMPT) <= 0, what + " took " + took);
        return result;
    }
}
