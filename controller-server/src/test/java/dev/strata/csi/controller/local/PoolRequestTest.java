package dev.strata.csi.controller.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/** The StorageClass's choice of pool, and what a node's pools can give a volume of it. */
class PoolRequestTest {

    private static final long MIB = 1L << 20;

    private static final PoolStatus IMAGE = PoolStatus.newBuilder().setTotalBytes(1000 * MIB).setAvailableBytes(700 * MIB).build();
    private static final PoolStatus LVM = PoolStatus.newBuilder()
            .setKind(PoolKind.POOL_LVM)
            .setTotalBytes(512 * MIB).setAvailableBytes(256 * MIB)
            .setThinDataBytes(512 * MIB).setThinReservedBytes(256 * MIB)
            .setLinearAvailableBytes(300 * MIB)
            .build();

    private static AgentDirectory.Agent agent(List<PoolStatus> pools) {
        return new AgentDirectory.Agent("node-a", "127.0.0.1:1", IMAGE, Map.of(), Instant.EPOCH, pools);
    }

    private static Status.Code refused(Map<String, String> parameters) {
        return assertThrows(CsiException.class, () -> PoolRequest.of(parameters)).code();
    }

    @Test
    void theImagePoolIsTheDefaultAndLvmIsThinUnlessLinear() {
        assertEquals(new PoolRequest(PoolKind.POOL_IMAGE, Allocation.SPARSE, 1), PoolRequest.of(Map.of()));
        assertEquals(new PoolRequest(PoolKind.POOL_IMAGE, Allocation.FULL, 1), PoolRequest.of(Map.of("allocation", "full")));
        assertEquals(new PoolRequest(PoolKind.POOL_LVM, Allocation.SPARSE, 1), PoolRequest.of(Map.of("pool", "lvm")));
        assertEquals(new PoolRequest(PoolKind.POOL_LVM, Allocation.FULL, 1), PoolRequest.of(Map.of("pool", "lvm", "lvType", "linear")));
        assertEquals(new PoolRequest(PoolKind.POOL_LVM, Allocation.SPARSE, 2.5),
                PoolRequest.of(Map.of("pool", "lvm", "thinOvercommitRatio", "2.5")));
    }

    @Test
    void aKeyOfTheOtherPoolOrAValueOutsideItsRangeIsInvalid() {
        assertEquals(Status.Code.INVALID_ARGUMENT, refused(Map.of("pool", "zfs")));
        assertEquals(Status.Code.INVALID_ARGUMENT, refused(Map.of("pool", "lvm", "allocation", "full")));
        assertEquals(Status.Code.INVALID_ARGUMENT, refused(Map.of("lvType", "thin")));
        assertEquals(Status.Code.INVALID_ARGUMENT, refused(Map.of("thinOvercommitRatio", "2")));
        assertEquals(Status.Code.INVALID_ARGUMENT, refused(Map.of("pool", "lvm", "lvType", "striped")));
        assertEquals(Status.Code.INVALID_ARGUMENT, refused(Map.of("pool", "lvm", "lvType", "linear", "thinOvercommitRatio", "2")));
        for (String ratio : List.of("0.5", "101", "NaN", "Infinity", "-2", "1e2", "two", "")) {
            assertEquals(Status.Code.INVALID_ARGUMENT, refused(Map.of("pool", "lvm", "thinOvercommitRatio", ratio)), ratio);
        }
        CsiException typo = assertThrows(CsiException.class, () -> PoolRequest.of(Map.of("pol", "lvm")));
        assertTrue(typo.getMessage().contains("pool"), typo.getMessage());
    }

    @Test
    void whatANodeCanGiveDependsOnThePoolAndItsKind() {
        AgentDirectory.Agent both = agent(List.of(IMAGE.toBuilder().setKind(PoolKind.POOL_IMAGE).build(), LVM));
        AgentDirectory.Agent imageOnly = agent(List.of());
        assertEquals(Optional.of(700 * MIB), PoolRequest.of(Map.of()).available(imageOnly), "an agent that reports no pools: its image pool");
        assertEquals(Optional.empty(), PoolRequest.of(Map.of("pool", "lvm")).available(imageOnly), "no LVM pool");
        assertEquals(Optional.of(256 * MIB), PoolRequest.of(Map.of("pool", "lvm")).available(both), "thin, no overcommit");
        assertEquals(Optional.of(300 * MIB), PoolRequest.of(Map.of("pool", "lvm", "lvType", "linear")).available(both));
        assertEquals(Optional.of(768 * MIB), PoolRequest.of(Map.of("pool", "lvm", "thinOvercommitRatio", "2")).available(both),
                "twice the thin pool less what the thin volumes take");
        AgentDirectory.Agent lvmOnly = agent(List.of(LVM)); // node-server's --image-pool=false: its pool field says nothing
        assertEquals(Optional.empty(), PoolRequest.of(Map.of()).available(lvmOnly), "an agent that lists pools without the image pool has none");
        assertEquals(Optional.empty(), PoolRequest.of(Map.of("allocation", "full")).available(lvmOnly));
        assertEquals(Optional.of(256 * MIB), PoolRequest.of(Map.of("pool", "lvm")).available(lvmOnly));
        AgentDirectory.Agent unspecified = agent(List.of(IMAGE, LVM)); // an image pool listed without its kind
        assertEquals(Optional.of(700 * MIB), PoolRequest.of(Map.of()).available(unspecified));
        PoolStatus full = LVM.toBuilder().setThinFull(true).build();
        assertEquals(0, PoolRequest.of(Map.of("pool", "lvm", "thinOvercommitRatio", "2")).available(full), "a full thin pool takes nothing");
    }

    @Test
    void anImageOfAnOlderAgentIsInTheImagePool() {
        assertTrue(PoolRequest.of(Map.of()).holds(Volume.newBuilder().setName("pvc-1").build()));
        assertTrue(PoolRequest.of(Map.of("pool", "lvm")).holds(Volume.newBuilder().setPool(PoolKind.POOL_LVM).build()));
        assertEquals(false, PoolRequest.of(Map.of("pool", "lvm")).holds(Volume.getDefaultInstance()));
    }

    @Test
    void eachVolumesContextSaysItsOwnPoolsAttributeAndNoOtherPoolsKey() {
        Map<String, String> image = new java.util.TreeMap<>();
        PoolRequest.putContext(Volume.newBuilder().setAllocation(Allocation.FULL).build(), image);
        assertEquals(Map.of("allocation", "full"), image);
        Map<String, String> lvm = new java.util.TreeMap<>();
        PoolRequest.putContext(Volume.newBuilder().setPool(PoolKind.POOL_LVM).setAllocation(Allocation.SPARSE).build(), lvm);
        assertEquals(Map.of("pool", "lvm", "lvType", "thin"), lvm);
    }
}
