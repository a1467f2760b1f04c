package dev.strata.csi.controller.nfs;

import dev.strata.csi.linux.FileDescriptor;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.linux.SyscallException;
import java.io.IOException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.OptionalLong;
import jnr.constants.platform.Errno;

/**
 * Project quotas through system calls: FS_IOC_FSGETXATTR and FS_IOC_FSSETXATTR set a file's
 * project id, as chattr -p and xfs_io's chproj do; quotactl_fd(2) with the generic Q_SETQUOTA and
 * Q_GETNEXTQUOTA commands, which xfs and ext4 both take, sets and finds limits, as setquota(8)
 * does. Called on the platform thread {@link dev.strata.csi.system.Bounded} runs the export's work on.
 */
public final class SystemProjectQuotas implements ProjectQuotas {

    static final long FS_IOC_FSGETXATTR = Kernel.ior('X', 31, FsXattr.SIZE);
    static final long FS_IOC_FSSETXATTR = Kernel.iow('X', 32, FsXattr.SIZE);
    /** PRJQUOTA of linux/quota.h, and the commands as QCMD(command, PRJQUOTA) builds them. */
    private static final int PRJQUOTA = 2;
    static final int Q_SETQUOTA = qcmd(0x800008);
    static final int Q_GETNEXTQUOTA = qcmd(0x800009);

    private static final int OPEN_FLAGS = Kernel.O_RDONLY | Kernel.O_CLOEXEC | Kernel.O_NOFOLLOW | Kernel.O_NONBLOCK | Kernel.O_NOCTTY;

    private final Kernel kernel;

    public SystemProjectQuotas(Kernel kernel) {
        this.kernel = kernel;
    }

    @Override
    public void assign(Path dir, long id) throws SyscallException, IOException {
        if (marked(dir, id)) {
            return;
        }
        SyscallException[] failure = new SyscallException[1];
        Files.walkFileTree(dir, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attributes) {
                // Sockets, FIFOs and device nodes are left alone: opening one can block or act.
                return attributes.isRegularFile() ? mark(file, false) : FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException e) throws IOException {
                if (e instanceof NoSuchFileException) {
                    return FileVisitResult.CONTINUE; // removed meanwhile
                }
                throw e;
            }

            @Override
            public FileVisitResult postVisitDirectory(Path directory, IOException e) throws IOException {
                if (e != null && !(e instanceof NoSuchFileException)) {
                    throw e;
                }
                return mark(directory, true);
            }

            private FileVisitResult mark(Path path, boolean directory) {
                try {
                    setProject(path, id, directory);
                    return FileVisitResult.CONTINUE;
                } catch (SyscallException e) {
                    // Removed or replaced by a link meanwhile: nothing of this project's to mark.
                    if (!path.equals(dir) && (e.is(Errno.ENOENT) || e.is(Errno.ELOOP) || e.is(Errno.ENOTDIR))) {
                        return FileVisitResult.CONTINUE;
                    }
                    failure[0] = e;
                    return FileVisitResult.TERMINATE;
                }
            }
        });
        if (failure[0] != null) {
            throw failure[0];
        }
    }

    @Override
    public void limit(Path onFilesystem, long id, long bytes) throws SyscallException {
        try (FileDescriptor fd = kernel.open(onFilesystem.toString(), Kernel.O_RDONLY | Kernel.O_DIRECTORY | Kernel.O_CLOEXEC)) {
            QuotaBlock quota = kernel.allocate(new QuotaBlock(kernel.runtime()));
            quota.blockHardLimit.set(Math.ceilDiv(bytes, 1024));
            quota.blockSoftLimit.set(0);
            quota.valid.set(QuotaBlock.BLOCK_LIMITS);
            kernel.quotactl(fd, "Q_SETQUOTA", Q_SETQUOTA, (int) id, quota);
        }
    }

    @Override
    public OptionalLong nextInUse(Path onFilesystem, long from) throws SyscallException {
        try (FileDescriptor fd = kernel.open(onFilesystem.toString(), Kernel.O_RDONLY | Kernel.O_DIRECTORY | Kernel.O_CLOEXEC)) {
            QuotaBlock quota = kernel.allocate(new QuotaBlock(kernel.runtime()));
            kernel.quotactl(fd, "Q_GETNEXTQUOTA", Q_GETNEXTQUOTA, (int) from, quota);
            return OptionalLong.of(quota.id.get());
        } catch (SyscallException e) {
            if (e.is(Errno.ENOENT)) {
                return OptionalLong.empty(); // no id from there on has a quota
            }
            throw e;
        }
    }

    /** Whether {@code dir} carries project {@code id} and passes it on. */
    private boolean marked(Path dir, long id) throws SyscallException {
        try (FileDescriptor fd = kernel.open(dir.toString(), OPEN_FLAGS | Kernel.O_DIRECTORY)) {
            FsXattr attributes = read(fd);
            return attributes.projectId.get() == id && (attributes.flags.get() & FsXattr.PROJECT_INHERIT) != 0;
        }
    }

    private void setProject(Path path, long id, boolean directory) throws SyscallException {
        try (FileDescriptor fd = kernel.open(path.toString(), OPEN_FLAGS | (directory ? Kernel.O_DIRECTORY : 0))) {
            FsXattr attributes = read(fd);
            long flags = attributes.flags.get() | (directory ? FsXattr.PROJECT_INHERIT : 0);
            if (attributes.projectId.get() == id && attributes.flags.get() == flags) {
                return;
            }
            attributes.projectId.set(id);
            attributes.flags.set(flags);
            kernel.ioctl(fd, "FS_IOC_FSSETXATTR", FS_IOC_FSSETXATTR, attributes);
        }
    }

    private FsXattr read(FileDescriptor fd) throws SyscallException {
        FsXattr attributes = kernel.allocate(new FsXattr(kernel.runtime()));
        kernel.ioctl(fd, "FS_IOC_FSGETXATTR", FS_IOC_FSGETXATTR, attributes);
        return attributes;
    }

    private static int qcmd(int command) {
        return (command << 8) | PRJQUOTA;
    }
}
