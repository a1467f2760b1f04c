package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static dev.strata.csi.e2e.SnapshotCopiesNodeLossTest.readDevice;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestVolumeGroup;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * SnapshotCopiesNodeLossTest's loss of a node on LVM pools: three node-servers as processes, each
 * with a volume group of its own (a loop device over a file, a thin pool) and no image pool. Thin
 * volumes, one ext4 and one block, written and snapshotted with {@code copies: "2"}; node-a's
 * node-server killed for good, its volume group removed and its disk file and pool directory
 * deleted; the snapshots restore on node-b from its copy and onto node-c streamed from it, every
 * byte as it was. Deleted, they leave no logical volume, record or tombstone on any node. Needs
 * device-mapper: hack/lvm-vm.sh runs it in a VM.
 */
@Tag("root")
class LvmSnapshotCopiesNodeLossTest {

    private static final Map<String, String> THIN = Map.of("pool", "lvm");
    private static final Map<String, String> TWO_COPIES = Map.of("copies", "2");
    // lvm2's commands take seconds in an emulated VM.
    private static final Duration WITHIN = Duration.ofSeconds(600);

    @TempDir
    Path dir;

    private final Map<String, TestVolumeGroup> groups = new LinkedHashMap<>();
    private Cluster cluster;

    @AfterEach
    void nothingLeftBehind() throws Exception {
        try {
            if (cluster != null) {
                cluster.close();
                for (var group : groups.entrySet()) {
                    assertEquals(List.of(), group.getValue().driverVolumes(), "no logical volume left on " + group.getKey());
                    try (Stream<Path> files = Files.walk(dir.resolve("cluster/" + group.getKey() + "/pool"))) {
                        assertEquals(List.of(), files.map(Path::toString)
                                .filter(file -> file.endsWith(".record") || file.endsWith(".tombstone")).toList(),
                                "no record or tombstone left on " + group.getKey());
                    }
                }
            }
            assertEquals(List.of(), SystemState.cleanUp(dir.resolve("cluster")), "the test left mounts or loop devices behind");
        } finally {
            PipelineTest.cluster = null;
            SnapshotTest.cluster = null;
            for (TestVolumeGroup group : groups.values()) {
                group.close();
            }
        }
    }

    @Test
    void thinSnapshotsWithTwoCopiesRestoreAfterTheirNodeAndItsVolumeGroupAreLost() throws Exception {
        Root.require();
        long started = System.nanoTime();
        cluster = Cluster.start(dir.resolve("cluster"), List.of("--agent-plaintext", "true"), List.of("--agent-call-timeout", "120s"),
                Map.of());
        PipelineTest.cluster = cluster;
        SnapshotTest.cluster = cluster;
        for (String node : List.of("node-a", "node-b", "node-c")) {
            TestVolumeGroup group = TestVolumeGroup.make(dir, "strata-copies-" + ProcessHandle.current().pid() + "-" + node, "1G", "512m");
            groups.put(node, group);
            cluster.startNode(node, Cluster.Launch.HOST.with(Map.of("VOLUME_GROUP", group.name(), "THIN_POOL", TestVolumeGroup.THIN_POOL,
                    "IMAGE_POOL", "false")));
        }

        VolumeCapability ext4 = PipelineTest.mount("ext4");
        VolumeCapability block = PipelineTest.block();
        var filesystem = SnapshotTest.publish("node-a", SnapshotTest.create("pvc-fs", 64 * MIB, ext4, "node-a", null, THIN), ext4);
        String fileThen = VolumeData.write(filesystem.target().resolve("data"), 6 * MIB);
        var device = SnapshotTest.publish("node-a", SnapshotTest.create("pvc-block", 64 * MIB, block, "node-a", null, THIN), block);
        TransferCrashTest.write(device.target(), 4 * MIB, 8 * MIB, 7);
        String deviceThen = readDevice(device.target());

        long cut = System.nanoTime();
        Snapshot fsSnapshot = snapshotWithTwoCopies("snap-fs", filesystem.volume());
        Snapshot blockSnapshot = snapshotWithTwoCopies("snap-block", device.volume());
        long ready = System.nanoTime();
        assertTrue(cluster.controllerProcess().output().contains("to=node-b"), "node-b keeps the copies:\n" + cluster.logs());
        assertFalse(groups.get("node-b").driverVolumes().isEmpty(), "the copies are logical volumes in node-b's group");
        SnapshotTest.delete(filesystem); // deleting the source volumes keeps the snapshots and their copies
        SnapshotTest.delete(device);

        cluster.node("node-a").process().close();
        TestVolumeGroup lost = groups.remove("node-a");
        lost.close();
        Files.delete(dir.resolve(lost.name() + ".disk"));
        SystemState.run("rm", "-rf", cluster.node("node-a").pool().toString());
        SnapshotCopiesNodeLossTest.awaitExpired("node-a");
        assertEquals(List.of(blockSnapshot.getSnapshotId(), fsSnapshot.getSnapshotId()).stream().sorted().toList(),
                SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder()).stream().map(Snapshot::getSnapshotId).sorted().toList(),
                "each listed once, by its id");

        var fsOnB = SnapshotTest.publish("node-b", restored("pvc-fs-on-b", ext4, "node-b", fsSnapshot), ext4);
        assertEquals(fileThen, VolumeData.read(fsOnB.target().resolve("data")), "restored on node-b from its copy: the file at snapshot time");
        var blockOnC = SnapshotTest.publish("node-c", restored("pvc-block-on-c", block, "node-c", blockSnapshot), block);
        assertEquals(deviceThen, readDevice(blockOnC.target()), "restored onto node-c from node-b's copy: the device at snapshot time");
        long restoredAt = System.nanoTime();
        SnapshotTest.delete(fsOnB);
        SnapshotTest.delete(blockOnC);

        for (Snapshot snapshot : List.of(fsSnapshot, blockSnapshot)) {
            cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
        }
        assertEquals(List.of(), SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder()));
        assertEquals(List.of(), groups.get("node-b").driverVolumes(), "node-b's copies deleted with the snapshots");
        // node-a stays down: node-b's tombstones name it until the controller counts node-a as removed.
        SnapshotCopiesNodeLossTest.awaitNoTombstones(cluster, "node-b", WITHIN);
        System.out.printf("lvm: copies: thin ext4 and block snapshots with two copies restored after their node's volume group was lost"
                + " (ready in %d s, restored in %d s, %d s in all)%n", seconds(ready - cut), seconds(restoredAt - ready),
                seconds(System.nanoTime() - started));
    }

    private Snapshot snapshotWithTwoCopies(String name, Volume source) throws InterruptedException {
        return SnapshotCopiesNodeLossTest.untilReady(cluster, CreateSnapshotRequest.newBuilder().setName(name)
                .setSourceVolumeId(source.getVolumeId()).putAllParameters(TWO_COPIES).build(), WITHIN);
    }

    private Volume restored(String name, VolumeCapability capability, String node, Snapshot snapshot) throws InterruptedException {
        Volume volume = SnapshotCopiesNodeLossTest.retried(cluster,
                () -> SnapshotTest.create(name, 0, capability, node, SnapshotTest.from(snapshot), THIN), WITHIN);
        assertEquals("local/" + node + "/" + name, volume.getVolumeId());
        assertEquals("lvm", volume.getVolumeContextMap().get("pool"), "restored into " + node + "'s LVM pool");
        return volume;
    }

    private static long seconds(long nanos) {
        return Duration.ofNanos(nanos).toSeconds();
    }
}
