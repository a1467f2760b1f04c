package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.Inventory;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.auth.AgentToken;
import dev.strata.csi.testing.Root;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A compromised node's inventory report, sent to the real controller-server process beside a real
 * node-server: a stand-in agent registers as node-evil (with the shared agent token, as root on a
 * node holds it) with malformed entries and with the names a tenant is about to create. The
 * registration with made-up pool figures is refused; the malformed entries are dropped, so
 * ListVolumes and ListSnapshots still answer for the cluster; the names it reports neither capture
 * nor block the tenant's volume and snapshot, which are made on node-a, where the request puts them.
 */
@Tag("root")
class InventoryReportsTest {

    private static final long MIB = 1L << 20;

    @TempDir
    Path dir;

    @Test
    void aNodesMalformedOrHijackingReportIsRefusedAndTheRestOfTheClusterKeepsWorking() throws Exception {
        Root.require();
        try (Cluster cluster = Cluster.start(dir, "node-a")) {
            ManagedChannel channel = ManagedChannelBuilder.forAddress("127.0.0.1", cluster.registryPort()).usePlaintext().build();
            try {
                var registry = AgentRegistryGrpc.newBlockingStub(channel)
                        .withCallCredentials(AgentToken.fromFile(cluster.tokenFile()).credentials());
                PoolStatus sane = PoolStatus.newBuilder().setTotalBytes(1L << 40).setAvailableBytes(1L << 40).build();
                dev.strata.csi.agent.api.Volume hijack = dev.strata.csi.agent.api.Volume.newBuilder().setName("pvc-hijack").setCapacityBytes(32 * MIB).setAllocation(Allocation.SPARSE).build();
                RegisterRequest evil = RegisterRequest.newBuilder().setNodeId("node-evil").setAddress("127.0.0.1:1").setInstance("evil")
                        .setPool(sane)
                        .setInventory(Inventory.newBuilder()
                                .addVolumes(hijack)
                                .addVolumes(dev.strata.csi.agent.api.Volume.newBuilder().setName("../../etc").setCapacityBytes(MIB))
                                .addVolumes(dev.strata.csi.agent.api.Volume.newBuilder().setName("pvc-negative").setCapacityBytes(-1))
                                .addSnapshots(Snapshot.newBuilder().setName("snap-hijack").setSourceVolume("pvc-hijack"))
                                .addSnapshots(Snapshot.newBuilder().setName("snap/\u0000").setSourceVolume("pvc-hijack")))
                        .build();

                StatusRuntimeException insane = assertThrows(StatusRuntimeException.class, () -> registry.withDeadlineAfter(30, TimeUnit.SECONDS)
                        .register(evil.toBuilder().setPool(PoolStatus.newBuilder().setTotalBytes(MIB).setAvailableBytes(1L << 50)).build()));
                assertEquals(Status.Code.INVALID_ARGUMENT, insane.getStatus().getCode(), insane.getStatus().toString());
                registry.withDeadlineAfter(30, TimeUnit.SECONDS).register(evil); // accepted, without its malformed entries

                // The tenant's claim: scheduled on node-a, node-evil allowed too (the topology of every node, as
                // external-provisioner sends without strict topology). node-evil's report of the name does not take it.
                Volume volume = cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName("pvc-hijack")
                        .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(32 * MIB))
                        .addVolumeCapabilities(PipelineTest.mount("ext4"))
                        .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(PipelineTest.on("node-a"))
                                .addRequisite(PipelineTest.on("node-a")).addRequisite(PipelineTest.on("node-evil")))
                        .build()).getVolume();
                assertEquals("local/node-a/pvc-hijack", volume.getVolumeId());
                assertEquals(List.of(PipelineTest.on("node-a")), volume.getAccessibleTopologyList());
                assertTrue(Files.exists(cluster.node("node-a").pool().resolve("pvc-hijack.img")), "made in node-a's pool");

                var snapshot = cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder().setName("snap-hijack")
                        .setSourceVolumeId(volume.getVolumeId()).build()).getSnapshot();
                assertTrue(snapshot.getSnapshotId().contains("node-a"), "taken on node-a, not blocked: " + snapshot.getSnapshotId());

                var volumes = cluster.controller().listVolumes(ListVolumesRequest.getDefaultInstance()).getEntriesList().stream()
                        .map(entry -> entry.getVolume().getVolumeId()).toList();
                assertTrue(volumes.contains(volume.getVolumeId()), volumes.toString());
                assertFalse(volumes.stream().anyMatch(id -> id.contains("etc") || id.contains("pvc-negative")), volumes.toString());
                var snapshots = cluster.controller().listSnapshots(ListSnapshotsRequest.getDefaultInstance()).getEntriesList().stream()
                        .map(entry -> entry.getSnapshot().getSnapshotId()).toList();
                assertTrue(snapshots.contains(snapshot.getSnapshotId()), snapshots.toString());
                assertTrue(cluster.logs().contains("malformed"), "the dropped entries are logged");

                cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
                cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
                assertFalse(Files.exists(cluster.node("node-a").pool().resolve("pvc-hijack.img")));
                System.out.println("inventory reports: node-evil's malformed entries dropped, its pool figures refused, its names"
                        + " captured nothing; " + volumes.size() + " volumes and " + snapshots.size() + " snapshots listed");
            } finally {
                channel.shutdownNow();
            }
        }
    }
}
