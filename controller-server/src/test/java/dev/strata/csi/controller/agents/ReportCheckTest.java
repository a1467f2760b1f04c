package dev.strata.csi.controller.agents;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Inventory;
import dev.strata.csi.agent.api.InventoryChanges;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class ReportCheckTest {

    private static final long GIB = 1L << 30;

    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    private final ReportCheck check = new ReportCheck(new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0));

    private static RegisterRequest.Builder registration() {
        return RegisterRequest.newBuilder().setNodeId("node-b").setAddress("10.0.0.2:9000").setInstance("i")
                .setPool(PoolStatus.newBuilder().setTotalBytes(10 * GIB).setAvailableBytes(4 * GIB));
    }

    private static Volume volume(String name, long bytes) {
        return Volume.newBuilder().setName(name).setCapacityBytes(bytes).build();
    }

    @Test
    void malformedEntriesAreDroppedAndLoggedAndTheRestApplies() {
        Volume good = volume("pvc-good", GIB).toBuilder().addPublishedNodeIds("node-b").build();
        RegisterRequest checked = check.checked(registration().setInventory(Inventory.newBuilder()
                .addVolumes(good)
                .addVolumes(volume("bad/name", GIB))
                .addVolumes(volume("", GIB))
                .addVolumes(volume("pvc-negative", -1))
                .addVolumes(volume("pvc-huge", Long.MAX_VALUE))
                .addVolumes(volume("pvc-published", GIB).toBuilder().addPublishedNodeIds("../node").build())
                .addVolumes(volume("pvc-source", GIB).toBuilder().setSource(ContentSource.newBuilder().setSnapshot("a\nb")).build())
                .addSnapshots(Snapshot.newBuilder().setName("snap-good").setSourceVolume("pvc-good").setCapacityBytes(GIB))
                .addSnapshots(Snapshot.newBuilder().setName("snap-bad\u0000").setSourceVolume("pvc-good"))
                .addSnapshots(Snapshot.newBuilder().setName("snap-source").setSourceVolume("/etc"))).build());
        assertEquals(List.of(good), checked.getInventory().getVolumesList());
        assertEquals(List.of("snap-good"), checked.getInventory().getSnapshotsList().stream().map(Snapshot::getName).toList());
        String log = logged.toString(StandardCharsets.UTF_8);
        assertTrue(log.contains("malformed") && log.contains("node=node-b") && log.contains("count=8"), log);

        RegisterRequest changes = check.checked(registration().setChanges(InventoryChanges.newBuilder()
                .addVolumes(volume("pvc-new", GIB)).addVolumes(volume("x".repeat(200), GIB))
                .addRemovedVolumes("pvc-gone").addRemovedVolumes("..")
                .addRemovedSnapshots("snap-gone").addRemovedSnapshots("a/b")).build());
        assertEquals(List.of("pvc-new"), changes.getChanges().getVolumesList().stream().map(Volume::getName).toList());
        assertEquals(List.of("pvc-gone"), changes.getChanges().getRemovedVolumesList());
        assertEquals(List.of("snap-gone"), changes.getChanges().getRemovedSnapshotsList());
    }

    @Test
    void insanePoolFiguresRefuseTheRegistration() {
        for (PoolStatus pool : List.of(
                PoolStatus.newBuilder().setTotalBytes(GIB).setAvailableBytes(2 * GIB).build(), // more free than there is
                PoolStatus.newBuilder().setTotalBytes(-1).build(),
                PoolStatus.newBuilder().setTotalBytes(Long.MAX_VALUE).setAvailableBytes(Long.MAX_VALUE).build(),
                PoolStatus.newBuilder().setLinearAvailableBytes(-5).build(),
                PoolStatus.newBuilder().setThinDataBytes(GIB).setThinDataUsedBytes(2 * GIB).build())) {
            CsiException refused = assertThrows(CsiException.class, () -> check.checked(registration().addPools(pool).build()));
            assertEquals(Status.Code.INVALID_ARGUMENT, refused.code(), pool.toString());
        }
        CsiException image = assertThrows(CsiException.class, () -> check.checked(registration()
                .setPool(PoolStatus.newBuilder().setTotalBytes(GIB).setAvailableBytes(ReportCheck.MAX_BYTES)).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, image.code());
        assertTrue(logged.toString(StandardCharsets.UTF_8).contains("registration refused"));
        RegisterRequest sane = registration().addPools(PoolStatus.newBuilder().setTotalBytes(GIB).setAvailableBytes(GIB)).build();
        assertEquals(sane, check.checked(sane), "a sane registration passes as it is");
    }
}
