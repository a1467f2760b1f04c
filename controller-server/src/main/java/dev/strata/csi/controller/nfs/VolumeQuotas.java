package dev.strata.csi.controller.nfs;

import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.linux.SyscallException;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.ExclusiveLock;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.OptionalLong;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import jnr.constants.platform.Errno;

/**
 * The capacity of NFS volumes, enforced with project quotas where the filesystem controller-server
 * sees at the export has them ({@link Export#projectQuotas}). Such a volume gets a project id of
 * its own, kept in its record; the record is written with the id before anything is set, so a
 * retried CreateVolume finds the id and completes what a crash left. An export's ids run from
 * {@link #FIRST_ID} up, past every id its records hold and every id the filesystem already counts
 * usage or limits for (ids people or another export on the same filesystem gave out).
 */
final class VolumeQuotas {

    /** The first project id the driver hands out: above the small ids people number their projects with (/etc/projid). */
    static final long FIRST_ID = 1L << 20;
    /** The last: the largest 32-bit id but one, since some tools read 0xffffffff as "no id". */
    static final long LAST_ID = 0xFFFF_FFFEL;
    /** In the export's driver directory: held while an id is chosen and its record written. */
    static final String LOCK_FILE = "project-ids.lock";

    private final ProjectQuotas quotas;
    private final Log log;
    private final ConcurrentMap<Path, Object> allocating = new ConcurrentHashMap<>();

    VolumeQuotas(ProjectQuotas quotas, Log log) {
        this.quotas = quotas;
        this.log = log;
    }

    /** Whether a new volume of {@code capacityBytes} on {@code export} gets a limit. */
    static boolean wanted(Export export, long capacityBytes) {
        return capacityBytes > 0 && export.projectQuotas();
    }

    /**
     * Writes a new volume's record with a project id of its own; the caller holds the record's lock
     * ({@link Export#lockRecord}). One allocation per export at a time, and the records are read
     * inside it, so two volumes never get one id: the threads of this process take turns, and then
     * hold a lock file in the export's driver directory, which other controller-server replicas
     * (other processes, other hosts) wait for too.
     */
    NfsVolumeRecord writeWithNewId(Export export, String subDir, NfsVolumeRecord record) throws IOException {
        synchronized (allocating.computeIfAbsent(export.mountPoint(), path -> new Object())) {
            Files.createDirectories(export.driverDir());
            try (ExclusiveLock held = ExclusiveLock.acquire(export.driverDir().resolve(LOCK_FILE))) {
                return writeWithNewIdLocked(export, subDir, record);
            }
        }
    }

    private NfsVolumeRecord writeWithNewIdLocked(Export export, String subDir, NfsVolumeRecord record) throws IOException {
        VolumeRecords records = export.records();
        long id = FIRST_ID;
        for (NfsVolumeRecord other : records.all(log)) {
            id = Math.max(id, Integer.toUnsignedLong(other.getProjectId()) + 1);
        }
        NfsVolumeRecord withId = record.toBuilder().setProjectId((int) firstUnused(export, id)).build();
        records.write(subDir, withId);
        return withId;
    }

    /**
     * Gives the volume's directory its project id and the id its limit; both are idempotent, so
     * this also completes a CreateVolume that a crash or a failure cut short.
     */
    void enforce(Export export, Path dir, NfsVolumeRecord record) {
        long id = Integer.toUnsignedLong(record.getProjectId());
        if (!export.projectQuotas()) {
            throw CsiException.failedPrecondition("volume " + record.getName() + " is limited with project quota id " + id
                    + ", but the filesystem at " + export.mountPoint() + " is not mounted with project quotas now; "
                    + "mount it with prjquota again (xfs or ext4, seen by controller-server as a local filesystem)");
        }
        String what = "cannot limit volume " + record.getName() + " to " + record.getCapacityBytes() + " bytes with project quota id " + id;
        try {
            quotas.assign(dir, id);
            quotas.limit(export.mountPoint(), id, record.getCapacityBytes());
        } catch (SyscallException e) {
            throw failure(what, export, e);
        } catch (IOException e) {
            throw CsiException.internal(what + ": " + CsiException.describe(e));
        }
    }

    /**
     * Lifts the limit of a volume that DeleteVolume takes away, before its directory goes or is
     * archived: a failure leaves the volume as it was, for the retry. Where quotas are off now, the
     * limit binds nothing and stays on the filesystem; that is logged and the delete goes on.
     */
    void release(Export export, NfsVolumeRecord record) {
        long id = Integer.toUnsignedLong(record.getProjectId());
        if (id == 0) {
            return;
        }
        if (!export.projectQuotas()) {
            leftBehind(export, record, "the filesystem is not mounted with project quotas now");
            return;
        }
        try {
            quotas.limit(export.mountPoint(), id, 0);
        } catch (SyscallException e) {
            if (!quotasOff(e)) {
                throw failure("cannot lift the limit of volume " + record.getVolumeId() + " (project quota id " + id + ")", export, e);
            }
            leftBehind(export, record, e.getMessage());
        }
    }

    private void leftBehind(Export export, NfsVolumeRecord record, String reason) {
        log.warn("project quota limit left on the export's filesystem; it binds nothing while quotas are off there",
                "volume", record.getVolumeId(), "projectId", Integer.toUnsignedLong(record.getProjectId()),
                "export", export.mountPoint(), "reason", reason);
    }

    /** The first id from {@code id} on that the filesystem has no usage or limit for. */
    private long firstUnused(Export export, long id) {
        for (; id <= LAST_ID; id++) {
            OptionalLong used;
            try {
                used = quotas.nextInUse(export.mountPoint(), id);
            } catch (SyscallException e) {
                throw failure("cannot find a free project quota id", export, e);
            }
            if (used.isEmpty() || used.getAsLong() != id) {
                return id;
            }
        }
        throw CsiException.resourceExhausted("no project quota id left on " + export.mountPoint() + " (the driver uses "
                + FIRST_ID + " to " + LAST_ID + ")");
    }

    /**
     * The export says project quotas and the kernel refuses them: FAILED_PRECONDITION where quotas
     * are off or missing on that filesystem (an administrator's to fix), INTERNAL otherwise.
     */
    private static CsiException failure(String what, Export export, SyscallException e) {
        String message = what + " on " + export.mountPoint() + ": " + e.getMessage();
        if (quotasOff(e)) {
            return CsiException.failedPrecondition(message + "; the filesystem is mounted with project quotas, "
                    + "but the kernel does not enforce them there");
        }
        return CsiException.internal(message);
    }

    /** ESRCH: quotas are off; ENOSYS: no quota support in the kernel; EOPNOTSUPP, ENOTTY: not on this filesystem. */
    private static boolean quotasOff(SyscallException e) {
        return e.is(Errno.ESRCH) || e.is(Errno.ENOSYS) || e.is(Errno.EOPNOTSUPP) || e.is(Errno.ENOTTY);
    }
}
