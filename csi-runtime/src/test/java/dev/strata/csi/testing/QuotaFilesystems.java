package dev.strata.csi.testing;

import dev.strata.csi.testing.Programs.Result;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Assumptions;

/**
 * xfs and ext4 filesystems in image files, loop-mounted with or without project quotas, and what
 * e2fsprogs and xfsprogs (not the driver's code) say of their project ids and limits.
 */
public final class QuotaFilesystems {

    private QuotaFilesystems() {}

    /** A file's project id, and whether it passes the id on to what is made in it (the P flag). */
    public record Project(long id, boolean inherits) {}

    /**
     * Makes a {@code type} filesystem (xfs or ext4, with the project feature) in {@code image} and
     * mounts it at {@code mountPoint} with {@code mount -o loop}, which detaches the loop device
     * again at unmount; with {@code projectQuotas}, mounted with prjquota. A kernel that cannot
     * mount it so (built without quota support) aborts the test: reported as skipped, with why.
     */
    public static void mount(String type, Path image, Path mountPoint, boolean projectQuotas) throws Exception {
        switch (type) {
            // 300 MiB is the least mkfs.xfs makes; the file stays sparse.
            case "xfs" -> Programs.run("sh", "-c", "truncate -s 320M '" + image + "' && mkfs.xfs -q -f '" + image + "'");
            // Project ids live in the large inode: 256 bytes, whatever mke2fs.conf says for small filesystems.
            case "ext4" -> Programs.run("sh", "-c", "truncate -s 64M '" + image + "' && mkfs.ext4 -q -F -I 256 -O quota,project '" + image + "'");
            default -> throw new IllegalArgumentException(type);
        }
        Programs.run("mkdir", "-p", mountPoint.toString());
        Result mounted = Programs.execute("mount", "-t", type, "-o", projectQuotas ? "loop,prjquota" : "loop", image.toString(), mountPoint.toString());
        if (mounted.status() != 0 && projectQuotas) {
            Assumptions.abort("SKIPPED: this kernel cannot mount " + type + " with project quotas (" + mounted.output().strip()
                    + "; " + Programs.execute("sh", "-c", "dmesg 2>/dev/null | tail -n 1").output().strip()
                    + "); quota enforcement is tested on a kernel with CONFIG_QUOTA, CONFIG_QFMT_V2 and CONFIG_XFS_QUOTA");
        }
        if (mounted.status() != 0) {
            throw new IllegalStateException("mount " + type + " " + image + ": " + mounted.output());
        }
    }

    /** Unmounts what {@link #mount} mounted (lazily if it is busy), which also detaches its loop device. */
    public static void unmount(Path mountPoint) throws Exception {
        if (Programs.execute("mountpoint", "-q", mountPoint.toString()).status() == 0 && Programs.execute("umount", mountPoint.toString()).status() != 0) {
            Programs.execute("umount", "--lazy", mountPoint.toString());
        }
    }

    /** The project id and P flag of {@code path}, as {@code lsattr -p -d} shows them. */
    public static Project projectOf(Path path) throws Exception {
        String[] fields = Programs.run("lsattr", "-p", "-d", path.toString()).strip().split("\\s+");
        return new Project(Long.parseLong(fields[0]), fields[1].contains("P"));
    }

    /** The block hard limit of project {@code id} in KiB, from xfs_quota's report (foreign mode for ext4); 0 when none is set. */
    public static long hardLimitKiB(Path mountPoint, long id) throws Exception {
        String report = Programs.run("xfs_quota", "-f", "-x", "-c", "report -p -b -n -N", mountPoint.toString());
        for (String line : report.lines().toList()) {
            List<String> fields = List.of(line.strip().split("\\s+"));
            if (fields.size() >= 4 && fields.get(0).equals("#" + id)) {
                return Long.parseLong(fields.get(3));
            }
        }
        return 0;
    }

    /**
     * Writes {@code mib} MiB of zeros to {@code file} with dd, as root in a container does: without
     * CAP_SYS_RESOURCE, which would let it past the limits of quotas on ext4 (xfs holds root too).
     */
    public static Result writeAsPod(Path file, int mib) throws Exception {
        return Programs.execute("setpriv", "--bounding-set", "-sys_resource", "--inh-caps", "-sys_resource",
                "dd", "if=/dev/zero", "of=" + file, "bs=1M", "count=" + mib, "conv=fsync");
    }

    /**
     * What a write past a project's hard limit fails with: EDQUOT on ext4; xfs reports a full
     * project as ENOSPC, as a full filesystem, so that df inside the directory tells the truth.
     */
    public static String limitReached(String type) {
        return type.equals("xfs") ? "No space left on device" : "Disk quota exceeded";
    }
}
