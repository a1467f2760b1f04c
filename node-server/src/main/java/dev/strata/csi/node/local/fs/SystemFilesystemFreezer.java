package dev.strata.csi.node.local.fs;

import dev.strata.csi.linux.FileDescriptor;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.linux.SyscallException;
import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;
import jnr.constants.platform.Errno;

/** {@link FilesystemFreezer} with the FIFREEZE and FITHAW ioctls on the mount point (linux/fs.h). */
public final class SystemFilesystemFreezer implements FilesystemFreezer {

    /** _IOWR('X', 119, int) and _IOWR('X', 120, int). */
    private static final long FIFREEZE = Kernel.iowr('X', 119, Integer.BYTES);
    private static final long FITHAW = Kernel.iowr('X', 120, Integer.BYTES);

    private final Kernel kernel;

    public SystemFilesystemFreezer(Kernel kernel) {
        this.kernel = kernel;
    }

    @Override
    public void freeze(Path mountPoint) throws DeviceException {
        try (FileDescriptor dir = open(mountPoint)) {
            kernel.ioctl(dir, "FIFREEZE", FIFREEZE, 0);
        } catch (SyscallException e) {
            throw new DeviceException("cannot freeze the filesystem at " + mountPoint + ": " + e.getMessage(), e);
        }
    }

    @Override
    public boolean thaw(Path mountPoint) throws DeviceException {
        try (FileDescriptor dir = open(mountPoint)) {
            kernel.ioctl(dir, "FITHAW", FITHAW, 0);
            return true;
        } catch (SyscallException e) {
            if (e.is(Errno.EINVAL)) {
                return false; // not frozen
            }
            throw new DeviceException("cannot thaw the filesystem at " + mountPoint + ": " + e.getMessage(), e);
        }
    }

    private FileDescriptor open(Path mountPoint) throws SyscallException {
        // Opening a directory for reading is allowed on a frozen filesystem; O_NOFOLLOW: the mount point itself.
        return kernel.open(mountPoint.toString(), Kernel.O_RDONLY | Kernel.O_DIRECTORY | Kernel.O_NOFOLLOW | Kernel.O_CLOEXEC);
    }
}
