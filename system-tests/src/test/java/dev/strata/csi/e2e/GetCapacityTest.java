package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.on;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCapability.AccessMode;
import dev.strata.csi.testing.LoopFilesystem;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * GetCapacity as external-provisioner's capacity controller asks it, and what it answers while
 * a rollout restarts the controller or a node's agent: never a 0 that would make the scheduler
 * give up on a node with room.
 */
@Tag("root")
class GetCapacityTest {

    @TempDir
    Path dir;

    private Cluster cluster;
    private LoopFilesystem pool;

    @AfterEach
    void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        if (pool != null) {
            pool.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir));
    }

    @Test
    void answersThePoolsSpaceWithAnyAccessModeOrNoCapabilityAtAll() throws Exception {
        Root.require();
        // The pool a filesystem of its own: on the machine's shared disk other work moves the free space meanwhile.
        pool = LoopFilesystem.mount(dir.resolve("pool.img"), 1L << 30, dir.resolve("node-a/pool"));
        cluster = Cluster.start(dir, "node-a");
        long free = Files.getFileStore(cluster.node("node-a").pool()).getUsableSpace();
        VolumeCapability anyMode = VolumeCapability.newBuilder()
                .setMount(VolumeCapability.MountVolume.newBuilder().setFsType("ext4"))
                .setAccessMode(AccessMode.newBuilder().setMode(AccessMode.Mode.UNKNOWN)).build();
        for (GetCapacityRequest request : List.of(
                GetCapacityRequest.newBuilder().setAccessibleTopology(on("node-a")).addVolumeCapabilities(anyMode).build(),
                GetCapacityRequest.newBuilder().setAccessibleTopology(on("node-a")).build(),
                GetCapacityRequest.newBuilder().addVolumeCapabilities(anyMode).build())) {
            long available = cluster.controller().getCapacity(request).getAvailableCapacity();
            assertTrue(Math.abs(available - free) < (4L << 20), request + " answered " + available + ", the pool has " + free);
        }
        VolumeCapability manyNodes = anyMode.toBuilder()
                .setAccessMode(AccessMode.newBuilder().setMode(AccessMode.Mode.MULTI_NODE_MULTI_WRITER)).build();
        assertEquals(0, cluster.controller().getCapacity(GetCapacityRequest.newBuilder()
                .setAccessibleTopology(on("node-a")).addVolumeCapabilities(manyNodes).build()).getAvailableCapacity(),
                "a local volume cannot be shared by nodes: no capacity for that");
        assertEquals(0, cluster.controller().getCapacity(GetCapacityRequest.newBuilder()
                .setAccessibleTopology(on("node-without-agent")).build()).getAvailableCapacity());
    }

    @Test
    void unavailableRatherThanZeroWhileAgentsComeBack() throws Exception {
        Root.require();
        // A controller just rolled out: its agents have not registered yet.
        cluster = Cluster.start(dir, List.of("--agent-plaintext", "true"), List.of("--agent-settle-time", "60s"), Map.of());
        GetCapacityRequest nodeA = GetCapacityRequest.newBuilder().setAccessibleTopology(on("node-a")).build();
        assertEquals(Status.Code.UNAVAILABLE, assertThrows(StatusRuntimeException.class,
                () -> cluster.controller().getCapacity(nodeA)).getStatus().getCode());
        assertEquals(Status.Code.UNAVAILABLE, assertThrows(StatusRuntimeException.class,
                () -> cluster.controller().getCapacity(GetCapacityRequest.getDefaultInstance())).getStatus().getCode());

        cluster.startNode("node-a");
        assertTrue(cluster.controller().getCapacity(nodeA).getAvailableCapacity() > 0);

        // The node's agent stops renewing (its pod is being replaced): its lease expires three renewals
        // after the last one the controller took, which may have been on its way as the process died.
        // Until then GetCapacity answers the pool it last reported; from then on UNAVAILABLE, never a 0.
        // The lease is 6 s (renewals every 2 s); the rest of the 15 s is for a busy machine.
        cluster.node("node-a").process().close();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        while (true) {
            try {
                long available = cluster.controller().getCapacity(nodeA).getAvailableCapacity();
                assertTrue(available > 0, "while the lease lasts, the pool as last reported: " + available);
            } catch (StatusRuntimeException e) {
                assertEquals(Status.Code.UNAVAILABLE, e.getStatus().getCode(), e.getStatus().toString());
                break;
            }
            assertTrue(System.nanoTime() < deadline, "the lease of an agent that stopped renewing did not expire within 15 s:\n" + cluster.logs());
            Thread.sleep(250);
        }

        cluster.startNode("node-a");
        assertTrue(cluster.controller().getCapacity(nodeA).getAvailableCapacity() > 0);
    }
}
