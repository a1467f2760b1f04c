package dev.strata.csi.node.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import org.junit.jupiter.api.Test;

/** A new volume says its own pool's kind of blocks: an image its allocation, a logical volume its lv_type, never the other's. */
class NewVolumeChecksTest {

    private static final long MIB = 1 << 20;

    @Test
    void eachPoolTakesItsOwnField() {
        NodeAgentService.checkNewVolume(MIB, PoolKind.POOL_IMAGE, Allocation.FULL, LvType.LV_TYPE_UNSPECIFIED);
        NodeAgentService.checkNewVolume(MIB, PoolKind.POOL_KIND_UNSPECIFIED, Allocation.SPARSE, LvType.LV_TYPE_UNSPECIFIED);
        NodeAgentService.checkNewVolume(MIB, PoolKind.POOL_LVM, Allocation.ALLOCATION_UNSPECIFIED, LvType.LINEAR);
        NodeAgentService.checkNewVolume(MIB, PoolKind.POOL_LVM, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN);
    }

    @Test
    void anLvmVolumeIsNotAskedForByAllocation() {
        assertTrue(refused(PoolKind.POOL_LVM, Allocation.FULL, LvType.LV_TYPE_UNSPECIFIED).contains("lv_type must be THIN or LINEAR"));
        assertTrue(refused(PoolKind.POOL_LVM, Allocation.FULL, LvType.LINEAR).contains("allocation is the image pool's"));
    }

    @Test
    void anImageIsNotAskedForByLvType() {
        assertTrue(refused(PoolKind.POOL_IMAGE, Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN).contains("allocation must be SPARSE or FULL"));
        assertTrue(refused(PoolKind.POOL_IMAGE, Allocation.SPARSE, LvType.THIN).contains("lv_type is the LVM pool's"));
    }

    private static String refused(PoolKind pool, Allocation allocation, LvType lvType) {
        CsiException e = assertThrows(CsiException.class, () -> NodeAgentService.checkNewVolume(MIB, pool, allocation, lvType));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
        return e.getMessage();
    }
}
