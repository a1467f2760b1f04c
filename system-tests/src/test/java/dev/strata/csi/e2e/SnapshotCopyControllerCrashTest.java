package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import dev.strata.csi.controller.local.LocalCrashPoint;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fault-injection suite of snapshot copies (VolumeSnapshotClass parameter copies):
 * controller-server killed at each {@link LocalCrashPoint}, started again unarmed, and the cut
 * call repeated as external-snapshotter repeats it. The snapshot becomes ready only with its copy
 * complete, which restores on the copy's node byte for byte; a deletion cut after a copy's
 * removal completes; nothing is left on either node.
 */
@Tag("root")
class SnapshotCopyControllerCrashTest {

    @TempDir
    Path dir;

    @TestFactory
    Stream<DynamicTest> everySnapshotCopyCrashPoint() {
        return Stream.of(LocalCrashPoint.values()).map(point -> DynamicTest.dynamicTest(point.name(), () -> crashAndRetry(point)));
    }

    private void crashAndRetry(LocalCrashPoint point) throws Exception {
        Root.require();
        Path clusterDir = dir.resolve(point.name());
        try (Cluster cluster = Cluster.start(clusterDir, Cluster.Launch.HOST.with(Crashes.ENVIRONMENT, point.name()), "node-a", "node-b")) {
            SnapshotTest.cluster = cluster;
            PipelineTest.cluster = cluster;
            Volume source = SnapshotTest.create("pvc-source", 128 * MIB, PipelineTest.block(), "node-a", null);
            Path image = cluster.node("node-a").pool().resolve("pvc-source.img");
            TransferCrashTest.write(image, 8 * MIB, 64 * MIB, 3);
            CreateSnapshotRequest take = CreateSnapshotRequest.newBuilder().setName("snap-crash")
                    .setSourceVolumeId(source.getVolumeId()).putParameters("copies", "2").build();
            DeleteSnapshotRequest delete = DeleteSnapshotRequest.newBuilder().setSnapshotId("local-snapshot/node-a/snap-crash").build();

            // The call that reaches the point, in the background: the controller halts in it or behind it.
            // As external-snapshotter asks, until the controller halts.
            CompletableFuture<Void> cut = CompletableFuture.runAsync(() -> {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                while (System.nanoTime() < deadline && cluster.controllerProcess().isAlive()) {
                    try {
                        if (cluster.controller().createSnapshot(take).getSnapshot().getReadyToUse()) {
                            cluster.controller().deleteSnapshot(delete);
                        }
                        Thread.sleep(200);
                    } catch (StatusRuntimeException e) {
                        // ABORTED, or the halt
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
            assertEquals(Crashes.EXIT_STATUS, cluster.controllerProcess().exitCode(), "controller-server halted at " + point
                    + ":\n" + cluster.logs());
            cut.get(30, TimeUnit.SECONDS);
            cluster.launchControllerAs(Cluster.Launch.HOST);
            cluster.startController(0);
            cluster.awaitRegistered(0);

            if (point != LocalCrashPoint.COPY_REMOTE_DELETED) {
                Snapshot ready = untilReady(cluster, take);
                if (point == LocalCrashPoint.COPY_PLANNED) {
                    String log = cluster.controllerProcess().output();
                    assertTrue(log.contains("snapshot copy complete"), "ready only once the restarted controller made the copy:\n" + log);
                }
                Volume onB = SidecarRetry.untilDone(Duration.ofSeconds(60),
                        () -> SnapshotTest.create("pvc-on-b", 0, PipelineTest.block(), "node-b", SnapshotTest.from(ready)));
                assertEquals(ContentTransferTest.sha256(image), ContentTransferTest.sha256(cluster.node("node-b").pool().resolve("pvc-on-b.img")),
                        "restored from node-b's copy, byte for byte");
                SnapshotTest.deleteVolume(onB);
            }
            SidecarRetry.untilDone(Duration.ofSeconds(60), () -> cluster.controller().deleteSnapshot(delete));
            assertEquals(List.of(), SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder()));
            SnapshotTest.deleteVolume(source);
            for (String node : List.of("node-a", "node-b")) {
                try (Stream<Path> files = Files.walk(cluster.node(node).pool())) {
                    assertEquals(List.of(), files.map(Path::toString).filter(file -> file.endsWith(".img") || file.endsWith(".record")).toList(),
                            "nothing left on " + node + " after " + point);
                }
            }
        } finally {
            SnapshotTest.cluster = null;
            PipelineTest.cluster = null;
        }
        assertEquals(List.of(), SystemState.cleanUp(clusterDir), "no mount or loop device left after " + point);
    }

    private static Snapshot untilReady(Cluster cluster, CreateSnapshotRequest take) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (true) {
            Snapshot snapshot = SidecarRetry.untilDone(Duration.ofSeconds(60), () -> cluster.controller().createSnapshot(take).getSnapshot());
            if (snapshot.getReadyToUse()) {
                return snapshot;
            }
            assertTrue(System.nanoTime() < deadline, "ready within 120 s:\n" + cluster.logs());
            Thread.sleep(500);
        }
    }
}
