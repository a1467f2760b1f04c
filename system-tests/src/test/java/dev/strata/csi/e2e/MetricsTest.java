package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.testing.Exposition;
import dev.strata.csi.testing.LoopFilesystem;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * --http-endpoint on both servers, run as processes: /healthz before and after they are ready,
 * and the scraped /metrics (parsed as Prometheus parses it) after a volume went through every
 * phase, with calls that failed among them.
 */
@Tag("root")
class MetricsTest {

    static final String DRIVER = "strata.csi.dev";

    @TempDir
    Path dir;

    @AfterEach
    void nothingLeftBehind() throws Exception {
        assertEquals(List.of(), SystemState.cleanUp(dir), "the test left mounts or loop devices behind");
    }

    @Test
    void bothServersServeHealthAndMetricsOfTheirCalls() throws Exception {
        Root.require();
        String controllerHttp = "127.0.0.1:" + Cluster.freePort();
        String nodeHttp = "127.0.0.1:" + Cluster.freePort();
        HealthWatch controllerHealth = new HealthWatch(controllerHttp);
        HealthWatch nodeHealth = new HealthWatch(nodeHttp);
        // The pool a filesystem of its own: its free space, compared below, moves with this test's writes only.
        try (LoopFilesystem pool = LoopFilesystem.mount(dir.resolve("pool.img"), 1L << 30, dir.resolve("node-a/pool"));
                Cluster cluster = Cluster.start(dir, List.of("--agent-plaintext"), List.of("--http-endpoint", controllerHttp),
                        Map.of("HTTP_ENDPOINT", nodeHttp), "node-a")) {
            controllerHealth.stop();
            nodeHealth.stop();
            controllerHealth.assertNotReadyThenReady();
            nodeHealth.assertNotReadyThenReady();

            VolumeCapability capability = PipelineTest.mount("ext4");
            Volume volume = cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName("pvc-metrics")
                    .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(64L << 20))
                    .addVolumeCapabilities(capability).build()).getVolume();
            assertCode(Status.Code.INVALID_ARGUMENT, () -> cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                    .addVolumeCapabilities(capability).build()));
            cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId("node-a").setVolumeCapability(capability).build());
            Cluster.Node node = cluster.node("node-a");
            Path staging = cluster.kubeletDir("node-a", "staging");
            Path target = cluster.kubeletDir("node-a", "pod").resolve("mount");
            node.node().nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build());
            assertCode(Status.Code.INVALID_ARGUMENT, () -> node.node().nodeStageVolume(NodeStageVolumeRequest.newBuilder()
                    .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build()));
            assertCode(Status.Code.NOT_FOUND, () -> node.node().nodeStageVolume(NodeStageVolumeRequest.newBuilder()
                    .setVolumeId("local/node-a/pvc-none").setStagingTargetPath(staging.toString()).setVolumeCapability(capability).build()));
            node.node().nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability).build());

            Exposition nodeMetrics = Exposition.scrape(nodeHttp);
            assertEquals(1, calls(nodeMetrics, "/csi.v1.Node/NodeStageVolume", "OK"));
            assertEquals(1, calls(nodeMetrics, "/csi.v1.Node/NodeStageVolume", "InvalidArgument"));
            assertEquals(1, calls(nodeMetrics, "/csi.v1.Node/NodeStageVolume", "NotFound"));
            assertEquals(1, calls(nodeMetrics, "/csi.v1.Node/NodePublishVolume", "OK"));
            assertEquals("0.001", nodeMetrics.bounds("csi_plugin_operations_seconds", Map.of("driver_name", DRIVER,
                    "method_name", "/csi.v1.Node/NodeStageVolume", "grpc_status_code", "OK")).getFirst());
            var store = Files.getFileStore(node.pool());
            assertEquals(store.getTotalSpace(), nodeMetrics.value("strata_pool_capacity_bytes", Map.of()));
            double available = nodeMetrics.value("strata_pool_available_bytes", Map.of());
            assertTrue(available > 0 && available <= store.getUsableSpace(), "available " + available + " of " + store.getUsableSpace());
            assertEquals(1, nodeMetrics.value("strata_pool_volumes", Map.of()));
            assertEquals(1, nodeMetrics.value("strata_pool_attached_loop_devices", Map.of()));
            assertEquals("gauge", nodeMetrics.types().get("strata_pool_available_bytes"));
            for (String step : List.of("create_image", "losetup_attach", "mkfs", "mount", "bind_mount")) {
                assertEquals(1, nodeMetrics.value("strata_system_step_seconds_count", Map.of("step", step)), step);
            }

            Exposition controllerMetrics = Exposition.scrape(controllerHttp);
            assertEquals(1, calls(controllerMetrics, "/csi.v1.Controller/CreateVolume", "OK"));
            assertEquals(1, calls(controllerMetrics, "/csi.v1.Controller/CreateVolume", "InvalidArgument"));
            assertEquals(1, calls(controllerMetrics, "/csi.v1.Controller/ControllerPublishVolume", "OK"));
            assertEquals(1, controllerMetrics.value("strata_agents", Map.of("state", "live")));
            assertEquals(0, controllerMetrics.value("strata_agents", Map.of("state", "expired")));
            double leaseAge = controllerMetrics.value("strata_agent_lease_age_seconds", Map.of("node", "node-a"));
            assertTrue(leaseAge >= 0 && leaseAge < 6, "renewed every 2s: " + leaseAge);
            assertEquals(1, controllerMetrics.value("strata_agent_call_seconds_count", Map.of("node", "node-a",
                    "method_name", "/" + NodeAgentGrpc.getCreateVolumeMethod().getFullMethodName(), "grpc_status_code", "OK")));
            assertEquals(1, controllerMetrics.value("strata_agent_call_seconds_count", Map.of("node", "node-a",
                    "method_name", "/" + NodeAgentGrpc.getAttachVolumeMethod().getFullMethodName(), "grpc_status_code", "OK")));

            node.node().nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setTargetPath(target.toString()).build());
            node.node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).build());
            cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId("node-a").build());
            nodeMetrics = Exposition.scrape(nodeHttp);
            assertEquals(0, nodeMetrics.value("strata_pool_attached_loop_devices", Map.of()));
            assertEquals(2, nodeMetrics.value("strata_system_step_seconds_count", Map.of("step", "umount")));
            assertEquals(1, nodeMetrics.value("strata_system_step_seconds_count", Map.of("step", "losetup_detach")));
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
            assertEquals(0, Exposition.scrape(nodeHttp).value("strata_pool_volumes", Map.of()));
        } finally {
            controllerHealth.stop();
            nodeHealth.stop();
        }
    }

    private static double calls(Exposition metrics, String method, String code) {
        return metrics.value("csi_plugin_operations_seconds_count",
                Map.of("driver_name", DRIVER, "method_name", method, "grpc_status_code", code));
    }

    private static void assertCode(Status.Code code, Runnable call) {
        assertEquals(code, assertThrows(StatusRuntimeException.class, call::run).getStatus().getCode());
    }

    /** Asks /healthz every few milliseconds from before the server starts, keeping each answer. */
    private static final class HealthWatch {
        private final List<Integer> answers = new ArrayList<>();
        private final Thread thread;
        private volatile boolean stopped;

        HealthWatch(String address) {
            thread = Thread.ofPlatform().daemon().start(() -> {
                try {
                    while (!stopped) {
                        Exposition.healthz(address).ifPresent(code -> {
                            synchronized (answers) {
                                answers.add(code);
                            }
                        });
                        Thread.sleep(5);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
        }

        void stop() throws InterruptedException {
            stopped = true;
            thread.join();
        }

        /** Answers were 503 (if the watch caught the start) and then only 200 from the first 200 on. */
        void assertNotReadyThenReady() {
            synchronized (answers) {
                int firstOk = answers.indexOf(200);
                assertTrue(firstOk >= 0, "never ready: " + answers);
                assertTrue(answers.subList(0, firstOk).stream().allMatch(code -> code == 503), answers.toString());
                assertTrue(answers.subList(firstOk, answers.size()).stream().allMatch(code -> code == 200), answers.toString());
            }
        }
    }
}
