package dev.strata.csi.controller.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.linux.Kernel;
import dev.strata.csi.linux.SyscallException;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.QuotaFilesystems.Project;
import dev.strata.csi.testing.QuotaFilesystems;
import dev.strata.csi.testing.Root;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;
import jnr.constants.platform.Errno;
import jnr.ffi.Runtime;
import jnr.ffi.Struct;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Project ids and limits through the system calls, on real loop-mounted filesystems, checked with
 * lsattr and xfs_quota. Project ids need no quotas (xfs keeps them either way); limits need a
 * kernel with quota support, and a filesystem mounted with prjquota, and are skipped elsewhere.
 */
@Tag("root")
class SystemProjectQuotasTest {

    static final long ID = VolumeQuotas.FIRST_ID + 7;
    static final long MIB = 1L << 20;

    @TempDir
    Path dir;
    Path mountPoint;
    final Kernel kernel = new Kernel();
    final SystemProjectQuotas quotas = new SystemProjectQuotas(kernel);

    @AfterEach
    void unmount() throws Exception {
        if (mountPoint != null) {
            QuotaFilesystems.unmount(mountPoint);
        }
    }

    @Test
    @EnabledIfSystemProperty(named = "os.arch", matches = "amd64|x86_64|aarch64|riscv64|s390x")
    void ioctlAndQuotaCommandNumbers() {
        // The values linux/fs.h and linux/quota.h give, printed by a C program on x86_64.
        assertEquals(0x801c581fL, SystemProjectQuotas.FS_IOC_FSGETXATTR, "_IOR('X', 31, struct fsxattr)");
        assertEquals(0x401c5820L, SystemProjectQuotas.FS_IOC_FSSETXATTR, "_IOW('X', 32, struct fsxattr)");
        assertEquals(0x80000802, SystemProjectQuotas.Q_SETQUOTA, "QCMD(Q_SETQUOTA, PRJQUOTA)");
        assertEquals(0x80000902, SystemProjectQuotas.Q_GETNEXTQUOTA, "QCMD(Q_GETNEXTQUOTA, PRJQUOTA)");
    }

    @Test
    void structureLayouts() {
        Runtime runtime = kernel.runtime();
        FsXattr attributes = new FsXattr(runtime);
        assertEquals(FsXattr.SIZE, Struct.size(attributes));
        assertEquals(0, attributes.flags.offset());
        assertEquals(12, attributes.projectId.offset(), "offsetof(struct fsxattr, fsx_projid)");
        QuotaBlock quota = new QuotaBlock(runtime);
        assertEquals(QuotaBlock.SIZE, Struct.size(quota));
        assertEquals(64, quota.valid.offset(), "offsetof(struct if_dqblk, dqb_valid)");
        assertEquals(68, quota.id.offset(), "offsetof(struct if_nextdqblk, dqb_id)");
    }

    @Test
    void assignMarksTheTreeAndFollowsNoLink() throws Exception {
        mount("xfs", false);
        Path volume = Files.createDirectories(mountPoint.resolve("volume/sub"));
        Files.writeString(mountPoint.resolve("volume/file"), "before");
        Files.writeString(mountPoint.resolve("volume/sub/inner"), "before");
        Path outside = Files.writeString(mountPoint.resolve("outside"), "not the volume's");
        Files.createSymbolicLink(mountPoint.resolve("volume/link"), outside);
        Programs.run("mkfifo", mountPoint.resolve("volume/fifo").toString());
        volume = volume.getParent();

        quotas.assign(volume, ID);
        assertEquals(new Project(ID, true), QuotaFilesystems.projectOf(volume));
        assertEquals(new Project(ID, true), QuotaFilesystems.projectOf(volume.resolve("sub")));
        assertEquals(ID, QuotaFilesystems.projectOf(volume.resolve("file")).id());
        assertEquals(ID, QuotaFilesystems.projectOf(volume.resolve("sub/inner")).id());
        assertEquals(new Project(0, false), QuotaFilesystems.projectOf(outside), "the link was not followed");

        Files.createDirectories(volume.resolve("sub/later"));
        Files.writeString(volume.resolve("sub/later/file"), "after");
        assertEquals(new Project(ID, true), QuotaFilesystems.projectOf(volume.resolve("sub/later")), "inherited");
        assertEquals(ID, QuotaFilesystems.projectOf(volume.resolve("sub/later/file")).id(), "inherited");

        quotas.assign(volume, ID);
        assertEquals(new Project(ID, true), QuotaFilesystems.projectOf(volume), "a repeat changes nothing");
        quotas.assign(volume, ID + 1);
        assertEquals(ID + 1, QuotaFilesystems.projectOf(volume.resolve("sub/later/file")).id(), "another id is given to all");
    }

    @Test
    void limitsWithoutQuotasOnTheFilesystemFailAndSaySo() throws Exception {
        mount("xfs", false);
        SyscallException e = assertThrows(SyscallException.class, () -> quotas.limit(mountPoint, ID, 16 * MIB));
        assertTrue(e.is(Errno.ENOSYS) || e.is(Errno.ESRCH), e.getMessage());
        assertTrue(e.getMessage().startsWith("quotactl_fd(Q_SETQUOTA, id " + ID + ") on " + mountPoint), e.getMessage());
        assertThrows(SyscallException.class, () -> quotas.nextInUse(mountPoint, ID));
    }

    @Test
    void aFilesystemWithoutProjectIdsRefusesThem() throws Exception {
        mount("ext4-plain", false);
        Path volume = Files.createDirectories(mountPoint.resolve("volume"));
        SyscallException e = assertThrows(SyscallException.class, () -> quotas.assign(volume, ID));
        assertTrue(e.is(Errno.EOPNOTSUPP) || e.is(Errno.ENOTTY), e.getMessage());
    }

    @ParameterizedTest
    @ValueSource(strings = {"xfs", "ext4"})
    void aLimitHoldsWritesToTheCapacity(String type) throws Exception {
        mount(type, true);
        Path volume = Files.createDirectories(mountPoint.resolve("volume"));
        quotas.assign(volume, ID);
        quotas.limit(mountPoint, ID, 16 * MIB);
        assertEquals(16 * 1024, QuotaFilesystems.hardLimitKiB(mountPoint, ID));
        assertEquals(OptionalLong.of(ID), quotas.nextInUse(mountPoint, VolumeQuotas.FIRST_ID));
        assertEquals(OptionalLong.empty(), quotas.nextInUse(mountPoint, ID + 1));

        Programs.Result written = QuotaFilesystems.writeAsPod(volume.resolve("big"), 32);
        assertTrue(written.status() != 0 && written.output().contains(QuotaFilesystems.limitReached(type)), written.output());

        quotas.limit(mountPoint, ID, 0);
        assertEquals(0, QuotaFilesystems.hardLimitKiB(mountPoint, ID));
        written = QuotaFilesystems.writeAsPod(volume.resolve("big"), 32);
        assertEquals(0, written.status(), "without the limit the write passes: " + written.output());
    }

    private void mount(String type, boolean projectQuotas) throws Exception {
        Root.require();
        mountPoint = dir.resolve("mnt");
        if (type.equals("ext4-plain")) {
            Programs.run("sh", "-c", "truncate -s 64M '" + dir.resolve("image") + "' && mkfs.ext4 -q -F -O ^project,^quota '"
                    + dir.resolve("image") + "' && mkdir -p '" + mountPoint + "' && mount -o loop '" + dir.resolve("image") + "' '" + mountPoint + "'");
            return;
        }
        QuotaFilesystems.mount(type, dir.resolve("image"), mountPoint, projectQuotas);
    }
}
