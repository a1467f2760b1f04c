package dev.strata.csi.linux;

import jnr.ffi.NativeLong;
import jnr.ffi.Pointer;
import jnr.ffi.annotations.SaveError;
import jnr.ffi.types.dev_t;
import jnr.ffi.types.mode_t;
import jnr.ffi.types.off_t;
import jnr.ffi.types.size_t;
import jnr.ffi.types.ssize_t;

/**
 * The system calls the servers make themselves: the node instead of running mount(8), umount(8),
 * losetup(8) and fallocate(1), each of which costs a process start, several milliseconds, for one
 * call; the controller for project quotas on an export's filesystem. Public
 * because jnr-ffi implements it from outside this package; use it through {@link Kernel}.
 */
public interface LibC {

    @SaveError
    int mount(String source, String target, String filesystemType, NativeLong flags, String data);

    @SaveError
    int umount2(String target, int flags);

    /** open(2) is variadic; the mode is always passed, as the C library's wrapper reads it only with O_CREAT. */
    @SaveError
    int open(String path, int flags, @mode_t int mode);

    @SaveError
    int close(int fd);

    @SaveError
    int flock(int fd, int operation);

    /** ioctl(2) with an integer argument (or none: the kernel ignores it). */
    @SaveError
    int ioctl(int fd, NativeLong request, NativeLong argument);

    /** ioctl(2) with a pointer to a structure. */
    @SaveError
    int ioctl(int fd, NativeLong request, Pointer argument);

    @SaveError
    int fallocate(int fd, int mode, @off_t long offset, @off_t long length);

    @SaveError
    int fsync(int fd);

    @SaveError
    int ftruncate(int fd, @off_t long length);

    @SaveError
    @off_t
    long lseek(int fd, @off_t long offset, int whence);

    /** copy_file_range(2) with explicit offsets (pointers to 64-bit loff_t), which it advances. */
    @SaveError
    long copy_file_range(int inFd, Pointer inOffset, int outFd, Pointer outOffset, @size_t long length, int flags);

    /**
     * syscall(2) for a call the C library has no wrapper for (quotactl_fd): the number, a
     * descriptor, two integers and a pointer. syscall is variadic; integers and pointers are passed
     * as for a fixed parameter list on the architectures this driver runs on.
     */
    @SaveError
    long syscall(NativeLong number, int fd, int command, int id, Pointer argument);

    /** flistxattr(2): the names, each ending in NUL; with size 0, the size they need. */
    @SaveError
    @ssize_t
    long flistxattr(int fd, Pointer list, @size_t long size);

    /** fgetxattr(2): the value; with size 0, the size it needs. */
    @SaveError
    @ssize_t
    long fgetxattr(int fd, String name, Pointer value, @size_t long size);

    @SaveError
    int fsetxattr(int fd, String name, Pointer value, @size_t long size, int flags);

    @SaveError
    int mknod(String path, @mode_t int mode, @dev_t long device);

    /** umask(2) never fails; it returns the previous mask. */
    int umask(@mode_t int mask);

    /** statx(2): the same structure on every architecture, unlike stat(2)'s. */
    @SaveError
    int statx(int directoryFd, String path, int flags, int mask, Pointer statx);
}
