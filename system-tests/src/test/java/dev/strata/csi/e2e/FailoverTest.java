package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static dev.strata.csi.e2e.PipelineTest.on;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.ControllerGrpc.ControllerBlockingStub;
import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two controller-server replicas and two node-servers, every agent registered with both (as the
 * headless Service makes it in a cluster): the replica that created and attached a volume is
 * killed, and the other, whose sidecars would now lead, carries on at once with that volume and a
 * new one through every phase; the killed replica, restarted, serves too, and both give the same
 * answers. Effects are checked on the system (images, loop devices, mounts, data).
 */
@Tag("root")
class FailoverTest {

    static final long MIB = 1 << 20;

    @TempDir
    Path dir;

    @AfterEach
    void nothingLeftBehind() throws Exception {
        assertEquals(List.of(), SystemState.cleanUp(dir), "the test left mounts or loop devices behind");
    }

    /** ext4, single node writer, as the pipeline tests use it. */
    static VolumeCapability ext4() {
        return PipelineTest.mount("ext4");
    }

    static CreateVolumeRequest create(String name, String node) {
        return CreateVolumeRequest.newBuilder()
                .setName(name)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(64 * MIB))
                .addVolumeCapabilities(ext4())
                .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(on(node))
                        .addRequisite(on("node-a")).addRequisite(on("node-b")))
                .build();
    }

    static ControllerPublishVolumeRequest attach(Volume volume, String node) {
        return ControllerPublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setNodeId(node)
                .setVolumeCapability(ext4()).build();
    }

    static ControllerUnpublishVolumeRequest detach(Volume volume, String node) {
        return ControllerUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setNodeId(node).build();
    }

    /**
     * Volume id -> nodes it is published to, as {@code controller} lists them once it shows {@code expected}, or after 5 s: a replica's index
     * follows a change another replica made when the agent's report of it arrives, a round trip later.
     */
    static Map<String, List<String>> listedOnce(ControllerBlockingStub controller, Map<String, List<String>> expected)
            throws InterruptedException {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(5);
        Map<String, List<String>> volumes = listed(controller);
        while (!volumes.equals(expected) && System.nanoTime() < deadline) {
            Thread.sleep(50);
            volumes = listed(controller);
        }
        return volumes;
    }

    static Map<String, List<String>> listed(ControllerBlockingStub controller) {
        Map<String, List<String>> volumes = new TreeMap<>();
        ListVolumesResponse page = controller.listVolumes(ListVolumesRequest.getDefaultInstance());
        page.getEntriesList().forEach(entry -> volumes.put(entry.getVolume().getVolumeId(),
                entry.getStatus().getPublishedNodeIdsList().stream().sorted().toList()));
        assertEquals("", page.getNextToken(), "one page holds every volume");
        return volumes;
    }

    /**
     * Runs both calls at the same moment and each until it is not ABORTED (an agent busy with the
     * other's call on the volume), as a sidecar retries; their answers, in order.
     */
    static List<Map<String, String>> bothAtOnce(Callable<Map<String, String>> one, Callable<Map<String, String>> other)
            throws Exception {
        CyclicBarrier start = new CyclicBarrier(2);
        try (ExecutorService callers = Executors.newFixedThreadPool(2)) {
            List<Future<Map<String, String>>> answers = new ArrayList<>();
            for (Callable<Map<String, String>> call : List.of(one, other)) {
                answers.add(callers.submit(() -> {
                    start.await();
                    while (true) {
                        try {
                            return call.call();
                        } catch (StatusRuntimeException e) {
                            if (e.getStatus().getCode() != Status.Code.ABORTED) {
                                throw e;
                            }
                            Thread.sleep(20);
                        }
                    }
                }));
            }
            return List.of(answers.get(0).get(), answers.get(1).get());
        }
    }

    @Test
    void theOtherReplicaCarriesOnWhenOneIsKilledAndBothServeOnceItIsBack() throws Exception {
        Root.require();
        try (Cluster cluster = Cluster.startReplicated(dir, 2, "node-a", "node-b")) {
            ControllerBlockingStub first = cluster.controller(0);
            ControllerBlockingStub second = cluster.controller(1);

            // Created and attached through replica 1.
            Volume old = first.createVolume(create("pvc-failover-old", "node-a")).getVolume();
            assertEquals("local/node-a/pvc-failover-old", old.getVolumeId());
            Path oldImage = cluster.node("node-a").pool().resolve("pvc-failover-old.img");
            String oldDevice = first.controllerPublishVolume(attach(old, "node-a")).getPublishContextOrThrow("devicePath");
            assertEquals(List.of(oldDevice), SystemState.loopDevicesOf(oldImage));
            assertEquals(Map.of(old.getVolumeId(), List.of("node-a")), listedOnce(second, Map.of(old.getVolumeId(), List.of("node-a"))),
                    "replica 2 sees what replica 1 did");

            // Replica 1 dies; replica 2 detaches and deletes that volume at once.
            cluster.killController(0);
            second.controllerUnpublishVolume(detach(old, "node-a"));
            assertEquals(List.of(), SystemState.loopDevicesOf(oldImage), "detached through replica 2");
            second.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(old.getVolumeId()).build());
            assertFalse(Files.exists(oldImage), "the image is gone from node-a's pool");

            // And takes a new volume through every phase.
            Volume fresh = second.createVolume(create("pvc-failover-new", "node-b")).getVolume();
            assertEquals("local/node-b/pvc-failover-new", fresh.getVolumeId());
            Cluster.Node node = cluster.node("node-b");
            Path image = node.pool().resolve("pvc-failover-new.img");
            assertEquals(64 * MIB, Files.size(image));
            var context = second.controllerPublishVolume(attach(fresh, "node-b")).getPublishContextMap();
            assertEquals(List.of(context.get("devicePath")), SystemState.loopDevicesOf(image));
            Path staging = cluster.kubeletDir("node-b", "staging");
            node.node().nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(fresh.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setVolumeCapability(ext4()).putAllPublishContext(context).build());
            assertEquals(context.get("devicePath"), SystemState.mountAt(staging).orElseThrow().source());
            assertEquals("ext4", SystemState.mountAt(staging).orElseThrow().fsType());
            Path target = cluster.kubeletDir("node-b", "pod").resolve("mount");
            node.node().nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(fresh.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(ext4()).build());
            byte[] data = "written after the failover\n".repeat(1000).getBytes(StandardCharsets.UTF_8);
            Files.write(target.resolve("data"), data);
            assertEquals(HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data)),
                    SystemState.run("sha256sum", staging.resolve("data").toString()).split(" ")[0],
                    "the pod's write is on the staged filesystem");
            node.node().nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(fresh.getVolumeId())
                    .setTargetPath(target.toString()).build());
            assertTrue(SystemState.mountAt(target).isEmpty());
            node.node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(fresh.getVolumeId())
                    .setStagingTargetPath(staging.toString()).build());
            assertTrue(SystemState.mountAt(staging).isEmpty());
            second.controllerUnpublishVolume(detach(fresh, "node-b"));
            assertEquals(List.of(), SystemState.loopDevicesOf(image));
            second.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(fresh.getVolumeId()).build());
            assertFalse(Files.exists(image));

            // Replica 1 comes back: the agents register with it at their next renewal, and it serves.
            // First node-a's renewal has found it gone (a renewal falls in the outage only if the
            // outage outlasts the renewal interval, which on a fast run it need not).
            cluster.node("node-a").process().awaitOutput(
                    "msg=\"cannot register with controller; retrying\" controller=127.0.0.1:" + cluster.registryPort());
            cluster.startController(0);
            cluster.awaitRegistered(0);
            first = cluster.controller(0);
            Volume made = first.createVolume(create("pvc-failover-again", "node-a")).getVolume();
            assertEquals(made, second.createVolume(create("pvc-failover-again", "node-a")).getVolume(),
                    "CreateVolume repeated through the other replica is the same volume");
            assertEquals(made, first.createVolume(create("pvc-failover-again", "node-b")).getVolume(),
                    "also when the repeat prefers another node: the name is found where it is");
            assertTrue(Files.exists(cluster.node("node-a").pool().resolve("pvc-failover-again.img")));
            assertFalse(Files.exists(cluster.node("node-b").pool().resolve("pvc-failover-again.img")), "no second image");
            String device = first.controllerPublishVolume(attach(made, "node-a")).getPublishContextOrThrow("devicePath");
            assertEquals(device, second.controllerPublishVolume(attach(made, "node-a")).getPublishContextOrThrow("devicePath"));
            Path madeImage = cluster.node("node-a").pool().resolve("pvc-failover-again.img");
            assertEquals(List.of(device), SystemState.loopDevicesOf(madeImage), "one loop device, whichever replica attached");

            // An old leader still finishing its call while the new one starts: both replicas send the
            // same call at once. The agent takes one at a time (the other is ABORTED and retried, as
            // the sidecars do) and every answer is the same.
            ControllerBlockingStub restarted = first;
            for (int round = 0; round < 5; round++) {
                List<Map<String, String>> detached = bothAtOnce(
                        () -> { restarted.controllerUnpublishVolume(detach(made, "node-a")); return Map.of(); },
                        () -> { second.controllerUnpublishVolume(detach(made, "node-a")); return Map.of(); });
                assertEquals(List.of(Map.of(), Map.of()), detached);
                assertEquals(List.of(), SystemState.loopDevicesOf(madeImage), "detached, round " + round);
                List<Map<String, String>> attached = bothAtOnce(
                        () -> restarted.controllerPublishVolume(attach(made, "node-a")).getPublishContextMap(),
                        () -> second.controllerPublishVolume(attach(made, "node-a")).getPublishContextMap());
                assertEquals(attached.get(0), attached.get(1), "both replicas answer the same device, round " + round);
                assertEquals(List.of(attached.get(0).get("devicePath")), SystemState.loopDevicesOf(madeImage),
                        "one loop device after two attaches at once, round " + round);
            }
            assertEquals(Map.of(made.getVolumeId(), List.of("node-a")), listedOnce(first, Map.of(made.getVolumeId(), List.of("node-a"))));
            assertEquals(listed(first), listedOnce(second, listed(first)), "both replicas list the same volumes");
            second.controllerUnpublishVolume(detach(made, "node-a"));
            assertEquals(List.of(), SystemState.loopDevicesOf(madeImage));
            first.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(made.getVolumeId()).build());
            assertFalse(Files.exists(madeImage));
            assertEquals(Map.of(), listed(first), "the replica that deleted it at once");
            assertEquals(Map.of(), listedOnce(second, Map.of()), "the other once node-a's report arrives");
            String registered = "msg=\"registered with controller\" controller=127.0.0.1:" + cluster.registryPort() + " ";
            String output = cluster.node("node-a").process().output();
            assertEquals(2, output.split(java.util.regex.Pattern.quote(registered), -1).length - 1,
                    "node-a registered with replica 1, lost it, and registered again once it was back:\n" + output);
            assertTrue(output.contains("msg=\"cannot register with controller; retrying\" controller=127.0.0.1:" + cluster.registryPort()),
                    output);
        }
    }
}
