package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.CreateSnapshotRequest;
import dev.strata.csi.agent.api.CreateVolumeRequest;
import dev.strata.csi.agent.api.DeleteSnapshotRequest;
import dev.strata.csi.agent.api.ListSnapshotsRequest;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.WriteSnapshotCopyResponse;
import dev.strata.csi.deploy.CrashPoints;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.CallCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fault-injection suite of snapshot copies: the receiving node-server is killed at each of
 * their crash points ({@link CrashPoints#snapshotCopy}) in the middle of an incremental copy (on
 * a base copy it holds), started again, and the copy repeated as controller-server repeats it:
 * ReceiveSnapshotCopy, then the relay from where the copy is. Until the copy is complete its
 * record says RECEIVING and no ListSnapshots shows it; after the retry it is complete, listed,
 * and byte for byte the origin's snapshot; a copy committed before the crash is found complete,
 * with nothing sent again.
 */
@Tag("root")
class SnapshotCopyCrashTest {

    private static final long SIZE = 64 * MIB;

    @TempDir
    static Path dir;

    private static Cluster cluster;
    private static CallCredentials token;
    private static SnapshotCopyRelay copies;
    private static Path source;
    private static Snapshot base;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, "node-a", "node-b");
        Relays relays = new Relays(cluster);
        token = relays.token();
        copies = new SnapshotCopyRelay(token);
        ManagedChannel a = relays.channel("node-a");
        ManagedChannel b = relays.channel("node-b");
        try {
            agent(a).createVolume(CreateVolumeRequest.newBuilder().setName("pvc-source").setCapacityBytes(SIZE)
                    .setAllocation(dev.strata.csi.agent.api.Allocation.SPARSE).build());
            source = cluster.node("node-a").pool().resolve("pvc-source.img");
            TransferCrashTest.write(source, 0, 32 * MIB, 1);
            base = agent(a).createSnapshot(CreateSnapshotRequest.newBuilder().setName("snap-base").setSourceVolume("pvc-source")
                    .addCopyNodes("node-b").build()).getSnapshot();
            copies.copy(a, "node-a", base, b, "", PoolKind.POOL_IMAGE);
        } finally {
            a.shutdownNow();
            b.shutdownNow();
        }
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir), "the suite left mounts or loop devices behind");
    }

    @TestFactory
    Stream<DynamicTest> everySnapshotCopyCrashPoint() {
        return Stream.of(CrashPoint.values()).filter(CrashPoints::snapshotCopy)
                .map(point -> DynamicTest.dynamicTest(point.name(), () -> crashAndRetry(point)));
    }

    private void crashAndRetry(CrashPoint point) throws Exception {
        String name = "snap-" + point.name().toLowerCase().replace('_', '-');
        Relays relays = new Relays(cluster);
        ManagedChannel a = relays.channel("node-a");
        TransferCrashTest.write(source, 8 * MIB, 16 * MIB, point.ordinal()); // what the copy sends: 16 MiB changed
        Snapshot snapshot = agent(a).createSnapshot(CreateSnapshotRequest.newBuilder().setName(name).setSourceVolume("pvc-source")
                .addCopyNodes("node-b").build()).getSnapshot();
        cluster.restartNode("node-b", Cluster.Launch.HOST.with(Crashes.ENVIRONMENT, point.name()));
        ManagedChannel crashing = relays.channel("node-b");
        try {
            StatusRuntimeException cut = assertThrows(StatusRuntimeException.class,
                    () -> copies.copy(a, "node-a", snapshot, crashing, "snap-base", PoolKind.POOL_IMAGE));
            var process = cluster.node("node-b").process();
            process.awaitOutput("crash point " + point + " reached");
            assertEquals(Crashes.EXIT_STATUS, process.exitCode(), "node-b halted at " + point + " (the copy ended " + cut.getStatus() + ")");
        } finally {
            crashing.shutdownNow();
        }
        cluster.startNode("node-b");
        ManagedChannel b = relays.channel("node-b");
        try {
            Path record = cluster.node("node-b").pool().resolve("snapshots").resolve(name + ".record");
            boolean committed = point == CrashPoint.SNAPSHOT_COPY_COMMITTED;
            String recorded = Files.readString(record);
            assertTrue(recorded.contains(committed ? "state: READY" : "state: RECEIVING"), point + ":\n" + recorded);
            assertEquals(committed, listed(b, name), "listed only once complete");

            WriteSnapshotCopyResponse copied = copies.copy(a, "node-a", snapshot, b, "snap-base", PoolKind.POOL_IMAGE);
            assertEquals("node-a", copied.getSnapshot().getOriginNode());
            if (committed) {
                assertEquals(0, copied.getWrittenBytes(), "found complete: nothing sent again");
            } else {
                assertTrue(copied.getWrittenBytes() > 0 && copied.getWrittenBytes() <= 16 * MIB,
                        "the changed bytes at most: " + copied.getWrittenBytes());
            }
            assertTrue(listed(b, name));
            assertEquals(SnapshotCopyTest.sha256(cluster.node("node-a").pool().resolve("snapshots").resolve(name + ".img")),
                    SnapshotCopyTest.sha256(cluster.node("node-b").pool().resolve("snapshots").resolve(name + ".img")), "byte for byte");
            for (ManagedChannel channel : List.of(b, a)) {
                agent(channel).deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName(name).build());
            }
            assertFalse(Files.exists(record));
        } finally {
            a.shutdownNow();
            b.shutdownNow();
        }
    }

    private static boolean listed(ManagedChannel channel, String name) {
        return agent(channel).listSnapshots(ListSnapshotsRequest.getDefaultInstance()).getSnapshotsList().stream()
                .anyMatch(s -> s.getName().equals(name));
    }

    private static NodeAgentGrpc.NodeAgentBlockingStub agent(ManagedChannel channel) {
        return NodeAgentGrpc.newBlockingStub(channel).withCallCredentials(token).withDeadlineAfter(60, TimeUnit.SECONDS);
    }
}
