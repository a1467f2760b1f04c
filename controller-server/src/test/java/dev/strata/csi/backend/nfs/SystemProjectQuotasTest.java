package dev.strata.csi.backend.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.strata.csi.linux.Kernel;
import jnr.ffi.Runtime;
import jnr.ffi.Struct;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/** The numbers and layouts of the quota system calls, against what linux/fs.h and linux/quota.h give (checked with gcc on x86_64). */
class SystemProjectQuotasTest {

    @Test
    @EnabledIfSystemProperty(named = "os.arch", matches = "amd64|x86_64|aarch64|riscv64|s390x")
    void ioctlAndQuotaCommandNumbers() {
        assertEquals(0x801c581fL, SystemProjectQuotas.FS_IOC_FSGETXATTR, "_IOR('X', 31, struct fsxattr)");
        assertEquals(0x401c5820L, SystemProjectQuotas.FS_IOC_FSSETXATTR, "_IOW('X', 32, struct fsxattr)");
        assertEquals(0x80000802, SystemProjectQuotas.Q_SETQUOTA, "QCMD(Q_SETQUOTA, PRJQUOTA)");
        assertEquals(0x80000902, SystemProjectQuotas.Q_GETNEXTQUOTA, "QCMD(Q_GETNEXTQUOTA, PRJQUOTA)");
    }

    @Test
    void structureLayouts() {
        Runtime runtime = new Kernel().runtime();
        FsXattr attributes = new FsXattr(runtime);
        assertEquals(FsXattr.SIZE, Struct.size(attributes));
        assertEquals(0, attributes.flags.offset());
        assertEquals(12, attributes.projectId.offset(), "offsetof(struct fsxattr, fsx_projid)");
        QuotaBlock quota = new QuotaBlock(runtime);
        assertEquals(QuotaBlock.SIZE, Struct.size(quota));
        assertEquals(64, quota.valid.offset(), "offsetof(struct if_dqblk, dqb_valid)");
        assertEquals(68, quota.id.offset(), "offsetof(struct if_nextdqblk, dqb_id)");
    }
}
