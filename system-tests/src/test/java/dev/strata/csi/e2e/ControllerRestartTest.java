package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
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
 * controller-server killed in the middle of a run of creates and started again: every create is
 * retried as external-provisioner retries it, each retry preferring the other node than the one
 * before, and still every name exists once, on one node, and the retry returns that node's volume.
 */
@Tag("root")
class ControllerRestartTest {

    static final long MIB = 1 << 20;

    @TempDir
    Path dir;

    @AfterEach
    void nothingLeftBehind() throws Exception {
        assertEquals(List.of(), SystemState.cleanUp(dir), "the test left mounts or loop devices behind");
    }

    @Test
    void aRestartInTheMiddleOfCreatesMakesNoNameTwice() throws Exception {
        Root.require();
        try (Cluster cluster = Cluster.start(dir.resolve("cluster"), List.of("--agent-plaintext", "true"),
                List.of("--agent-settle-time", "5s"), Map.of(), "node-a", "node-b")) {
            List<Volume> made = java.util.Collections.synchronizedList(new ArrayList<>());
            // Killed (SIGKILL) while creates run, whatever call is in flight then, and started again.
            Thread restarter = Thread.ofPlatform().start(() -> {
                try {
                    while (made.size() < 3) {
                        Thread.sleep(20);
                    }
                    cluster.killController(0);
                    cluster.startController(0);
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            for (int i = 0; i < 12; i++) {
                String name = "pvc-restart-" + i;
                // Each claim keeps its preferred node over its retries, as external-provisioner sends it (the
                // selected node with WaitForFirstConsumer; with Immediate binding an order derived from the claim's
                // name). A restarted controller trusts a node's report of a name it did not make only from the node
                // the request names first (#40: a node cannot capture another's claim), so that is what makes the
                // retry find the volume the killed controller made.
                String preferred = i % 2 == 0 ? "node-a" : "node-b";
                while (true) {
                    try {
                        made.add(cluster.controller().createVolume(request(name, preferred)).getVolume());
                        // The retry of a create that answered: the same volume.
                        Volume again = cluster.controller().createVolume(request(name, preferred)).getVolume();
                        assertEquals(made.getLast().getVolumeId(), again.getVolumeId());
                        break;
                    } catch (StatusRuntimeException e) {
                        Thread.sleep(200); // UNAVAILABLE while the restarted controller settles, or the controller is down
                    }
                }
            }
            restarter.join();
            for (int i = 0; i < 12; i++) {
                String image = "pvc-restart-" + i + ".img";
                int copies = 0;
                for (String node : List.of("node-a", "node-b")) {
                    copies += Files.exists(cluster.node(node).pool().resolve(image)) ? 1 : 0;
                }
                assertEquals(1, copies, image + " exists once");
            }
            assertTrue(cluster.controllerProcess().output().contains("agent registered"), "the restarted controller heard from the agents");
            for (Volume volume : made) {
                cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
            }
        }
    }

    private static CreateVolumeRequest request(String name, String preferred) {
        return CreateVolumeRequest.newBuilder()
                .setName(name)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(16 * MIB))
                .addVolumeCapabilities(PipelineTest.mount("ext4"))
                .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(PipelineTest.on(preferred))
                        .addRequisite(PipelineTest.on("node-a")).addRequisite(PipelineTest.on("node-b")))
                .build();
    }
}
