package dev.strata.csi.linux;

import dev.strata.csi.mount.DeviceNumber;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.IntSupplier;
import jnr.constants.platform.Errno;
import jnr.constants.platform.OpenFlags;
import jnr.ffi.LibraryLoader;
import jnr.ffi.Memory;
import jnr.ffi.NativeLong;
import jnr.ffi.Platform;
import jnr.ffi.Pointer;
import jnr.ffi.Runtime;
import jnr.ffi.Struct;

/**
 * The system calls the servers make in the process (the node's mounts, loop devices and image
 * files; the controller's project quotas), each failing with a {@link SyscallException} that names
 * the call and the errno. The callers are platform threads (the servers' call handlers): a
 * virtual thread in native code would pin its carrier.
 */
public final class Kernel {

    public static final int O_RDONLY = OpenFlags.O_RDONLY.intValue();
    public static final int O_WRONLY = OpenFlags.O_WRONLY.intValue();
    public static final int O_RDWR = OpenFlags.O_RDWR.intValue();
    public static final int O_CLOEXEC = OpenFlags.O_CLOEXEC.intValue();
    public static final int O_DIRECTORY = OpenFlags.O_DIRECTORY.intValue();
    public static final int O_NOFOLLOW = OpenFlags.O_NOFOLLOW.intValue();
    public static final int O_NONBLOCK = OpenFlags.O_NONBLOCK.intValue();
    public static final int O_NOCTTY = OpenFlags.O_NOCTTY.intValue();
    public static final int O_CREAT = OpenFlags.O_CREAT.intValue();
    public static final int O_EXCL = OpenFlags.O_EXCL.intValue();
    /**
     * O_DIRECT, which jnr-constants lacks; its value differs between architectures
     * (asm-generic/fcntl.h and the arch overrides). 0 where unknown: then nothing asks for direct I/O.
     */
    public static final int O_DIRECT = switch (System.getProperty("os.arch")) {
        case "amd64", "x86_64", "x86", "i386", "i686", "riscv64", "s390x" -> 040000;
        case "aarch64", "arm" -> 0200000;
        case "ppc64le", "ppc64" -> 0400000;
        default -> 0;
    };
    /**
     * The number of quotactl_fd(2) (Linux 5.14): 443 in asm-generic/unistd.h and in the tables of
     * every architecture listed here; -1 where unknown, and then the call fails with ENOSYS.
     */
    static final long SYS_QUOTACTL_FD = switch (System.getProperty("os.arch")) {
        case "amd64", "x86_64", "x86", "i386", "i686", "aarch64", "arm", "riscv64", "s390x", "ppc64le", "ppc64" -> 443;
        default -> -1;
    };
    /**
     * The direction bits of an ioctl number (asm-generic/ioctl.h): read is 2 and write 1 with 14
     * bits of size, except on powerpc, mips and sparc, where read is 2, write 4 and size 13 bits.
     */
    private static final boolean THREE_DIRECTION_BITS = System.getProperty("os.arch").matches("ppc.*|mips.*|sparc.*");
    /** AT_FDCWD (fcntl.h): a path relative to the working directory, for the *at calls. */
    private static final int AT_FDCWD = -100;
    /** STATX_BLOCKS, and where stx_blocks lies in struct statx (linux/stat.h), which is 256 bytes. */
    private static final int STATX_BLOCKS = 0x400;
    private static final int STATX_BLOCKS_OFFSET = 48;
    private static final int STATX_SIZE = 256;
    /** statx(2) of the descriptor itself (AT_EMPTY_PATH), its inode (STATX_INO), and where stx_ino and stx_dev_major lie. */
    private static final int AT_EMPTY_PATH = 0x1000;
    private static final int STATX_INO = 0x100;
    private static final int STATX_INO_OFFSET = 32;
    private static final int STATX_DEV_MAJOR_OFFSET = 136;
    /** lseek(2)'s whence for the next data, and the next hole, at or after an offset (Linux 3.1). */
    private static final int SEEK_DATA = 3;
    private static final int SEEK_HOLE = 4;
    /** FS_IOC_FIEMAP (linux/fs.h): _IOWR('f', 11, struct fiemap), a 32-byte header then 56-byte extents. */
    private static final long FS_IOC_FIEMAP = iowr('f', 11, 32);
    private static final int FIEMAP_HEADER = 32;
    private static final int FIEMAP_EXTENT_SIZE = 56;
    private static final int FIEMAP_EXTENTS_PER_CALL = 512;
    private static final int FIEMAP_FLAG_SYNC = 0x1;
    /** FICLONE (linux/fs.h): _IOW(0x94, 9, int), the destination shares the source's extents. */
    private static final long FICLONE = iow((char) 0x94, 9, Integer.BYTES);
    /** flock(2)'s operations (sys/file.h). */
    private static final int LOCK_EX = 2;
    private static final int LOCK_NB = 4;
    /** S_IFBLK from sys/stat.h: the node mknod makes is a block device. */
    private static final int S_IFBLK = 060000;

    private final LibC libc;
    private final Runtime runtime;

    public Kernel() {
        libc = LibraryLoader.create(LibC.class).load(Platform.getNativePlatform().getStandardCLibraryName());
        runtime = Runtime.getRuntime(libc);
    }

    /** mount(2); {@code source}, {@code type} and {@code data} may be null where mount(2) allows NULL. */
    public void mount(String source, String target, String type, long flags, String data) throws SyscallException {
        call("mount", () -> libc.mount(source, target, type, NativeLong.valueOf(flags), data));
    }

    /** umount2(2) without flags: no lazy or forced unmount, ever. */
    public void umount(String target) throws SyscallException {
        call("umount", () -> libc.umount2(target, 0));
    }

    public FileDescriptor open(String path, int flags) throws SyscallException {
        return open(path, flags, 0);
    }

    public FileDescriptor open(String path, int flags, int mode) throws SyscallException {
        return new FileDescriptor(this, call("open " + path, () -> libc.open(path, flags, mode)), path);
    }

    /** ioctl(2) with an integer argument; {@code name} is the request's name, for messages. */
    public int ioctl(FileDescriptor fd, String name, long request, long argument) throws SyscallException {
        return call("ioctl(" + name + ") on " + fd.path(),
                () -> libc.ioctl(fd.number(), NativeLong.valueOf(request), NativeLong.valueOf(argument)));
    }

    /** ioctl(2) with a structure, in and out; the structure must live in memory from {@link #allocate}. */
    public int ioctl(FileDescriptor fd, String name, long request, Struct argument) throws SyscallException {
        Pointer memory = Struct.getMemory(argument);
        return call("ioctl(" + name + ") on " + fd.path(),
                () -> libc.ioctl(fd.number(), NativeLong.valueOf(request), memory));
    }

    /**
     * quotactl_fd(2): quota command {@code command} (a QCMD value) for {@code id} on the filesystem
     * {@code fd} lies on; {@code name} names the command, for messages.
     */
    public void quotactl(FileDescriptor fd, String name, int command, int id, Struct argument) throws SyscallException {
        Pointer memory = Struct.getMemory(argument);
        String what = "quotactl_fd(" + name + ", id " + Integer.toUnsignedString(id) + ") on " + fd.path();
        if (SYS_QUOTACTL_FD < 0) {
            throw new SyscallException(what, Errno.ENOSYS.intValue());
        }
        call(what, () -> (int) libc.syscall(NativeLong.valueOf(SYS_QUOTACTL_FD), fd.number(), command, id, memory));
    }

    /** _IOR(type, number, size): an ioctl that reads a structure of {@code size} bytes out of the kernel. */
    public static long ior(char type, int number, int size) {
        return ioc(2, type, number, size);
    }

    /** _IOW(type, number, size): an ioctl that writes a structure of {@code size} bytes into the kernel. */
    public static long iow(char type, int number, int size) {
        return ioc(THREE_DIRECTION_BITS ? 4 : 1, type, number, size);
    }

    /** _IOWR(type, number, size): an ioctl that passes a structure of {@code size} bytes both ways. */
    public static long iowr(char type, int number, int size) {
        return ioc(THREE_DIRECTION_BITS ? 6 : 3, type, number, size);
    }

    private static long ioc(int direction, char type, int number, int size) {
        int sizeBits = THREE_DIRECTION_BITS ? 13 : 14;
        if (size >= 1 << sizeBits || number > 0xff || type > 0xff) {
            throw new IllegalArgumentException("no ioctl number for type " + type + ", number " + number + ", size " + size);
        }
        return ((long) direction << (8 + 8 + sizeBits)) | ((long) size << 16) | ((long) type << 8) | number;
    }

    /** Gives {@code struct} zeroed native memory of its own, as ioctl arguments need. */
    public <T extends Struct> T allocate(T struct) {
        struct.useMemory(Memory.allocateDirect(runtime, Struct.size(struct), true));
        return struct;
    }

    public Runtime runtime() {
        return runtime;
    }

    /** fallocate(2) in its default mode: the range is allocated and reads as zeros. */
    public void fallocate(FileDescriptor fd, long offset, long length) throws SyscallException {
        call("fallocate " + fd.path(), () -> libc.fallocate(fd.number(), 0, offset, length));
    }

    /**
     * fallocate(2) with FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: the range is deallocated and
     * reads as zeros; the file keeps its size. EOPNOTSUPP where the filesystem cannot.
     */
    public void punchHole(FileDescriptor fd, long offset, long length) throws SyscallException {
        call("fallocate punch-hole " + fd.path(), () -> libc.fallocate(fd.number(), 0x03, offset, length));
    }

    /** ftruncate(2): the file's size becomes {@code length}; growing it adds a hole. */
    public void ftruncate(FileDescriptor fd, long length) throws SyscallException {
        call("ftruncate " + fd.path(), () -> libc.ftruncate(fd.number(), length));
    }

    public void fsync(FileDescriptor fd) throws SyscallException {
        call("fsync " + fd.path(), () -> libc.fsync(fd.number()));
    }

    /**
     * The ranges of {@code fd} that hold data, in order, by lseek(2) SEEK_DATA and SEEK_HOLE: a
     * hole reads as zeros and is left out. A filesystem without hole tracking reports the whole
     * file as one range, which is still right.
     */
    public List<DataRange> dataRanges(FileDescriptor fd, long size) throws SyscallException {
        List<DataRange> ranges = new ArrayList<>();
        long offset = 0;
        while (offset < size) {
            long from = offset;
            long data = libc.lseek(fd.number(), from, SEEK_DATA);
            if (data == -1) {
                int errno = runtime.getLastError();
                if (errno == Errno.ENXIO.intValue()) { // no data after the offset: a hole to the end
                    break;
                }
                throw new SyscallException("lseek(SEEK_DATA) on " + fd.path(), errno);
            }
            long hole = libc.lseek(fd.number(), data, SEEK_HOLE);
            if (hole == -1) {
                throw new SyscallException("lseek(SEEK_HOLE) on " + fd.path(), runtime.getLastError());
            }
            long end = Math.min(hole, size);
            if (end > data) {
                ranges.add(new DataRange(data, end - data));
            }
            offset = end;
        }
        return ranges;
    }

    /** A range of a file that holds data. */
    public record DataRange(long offset, long length) {}

    /**
     * The file's extents from FIEMAP (delayed allocations flushed first, FIEMAP_FLAG_SYNC), in
     * order of their offset in the file, up to {@code size}: where each lies on the device, which
     * tells two files that share it (a reflink) from two that do not. Holes are not listed.
     * EOPNOTSUPP where the filesystem has no FIEMAP.
     */
    public List<Extent> extents(FileDescriptor fd, long size) throws SyscallException {
        List<Extent> extents = new ArrayList<>();
        Pointer map = Memory.allocateDirect(runtime, FIEMAP_HEADER + FIEMAP_EXTENT_SIZE * FIEMAP_EXTENTS_PER_CALL, true);
        long start = 0;
        while (start < size) {
            map.putLong(0, start); // fm_start
            map.putLong(8, size - start); // fm_length
            map.putInt(16, FIEMAP_FLAG_SYNC); // fm_flags
            map.putInt(20, 0); // fm_mapped_extents, out
            map.putInt(24, FIEMAP_EXTENTS_PER_CALL); // fm_extent_count
            map.putInt(28, 0);
            call("ioctl(FS_IOC_FIEMAP) on " + fd.path(), () -> libc.ioctl(fd.number(), NativeLong.valueOf(FS_IOC_FIEMAP), map));
            int mapped = map.getInt(20);
            if (mapped == 0) {
                break;
            }
            boolean last = false;
            for (int i = 0; i < mapped; i++) {
                int at = FIEMAP_HEADER + i * FIEMAP_EXTENT_SIZE;
                int flags = map.getInt(at + 40);
                extents.add(new Extent(map.getLong(at), map.getLong(at + 8), map.getLong(at + 16), flags));
                last |= (flags & Extent.LAST) != 0;
            }
            Extent end = extents.getLast();
            if (last || end.logical() + end.length() <= start) {
                break;
            }
            start = end.logical() + end.length();
        }
        return extents;
    }

    /**
     * One extent of a file (struct fiemap_extent): {@code length} bytes at {@code logical} in the
     * file, at {@code physical} on the device, and the FIEMAP_EXTENT_* flags.
     */
    public record Extent(long logical, long physical, long length, int flags) {
        public static final int LAST = 0x1;
        /** The location is not known yet, or not a plain address. */
        public static final int UNKNOWN = 0x2;
        public static final int DELALLOC = 0x4;
        /** Compressed or otherwise encoded: {@code physical} is not the address of this byte range. */
        public static final int ENCODED = 0x8;
        public static final int NOT_ALIGNED = 0x100;
        public static final int DATA_INLINE = 0x200;
        public static final int DATA_TAIL = 0x400;
        /** Allocated but never written: reads as zeros. */
        public static final int UNWRITTEN = 0x800;
        public static final int SHARED = 0x2000;
        private static final int NO_ADDRESS = UNKNOWN | DELALLOC | ENCODED | NOT_ALIGNED | DATA_INLINE | DATA_TAIL;

        /** Whether {@code physical} is the device address of the extent's first byte, each next byte one further. */
        public boolean located() {
            return (flags & NO_ADDRESS) == 0;
        }

        public boolean unwritten() {
            return (flags & UNWRITTEN) != 0;
        }

        public long end() {
            return logical + length;
        }
    }

    /** FICLONE: {@code destination} becomes a copy of {@code source} sharing its extents (xfs with reflink, btrfs). */
    public void cloneFile(FileDescriptor source, FileDescriptor destination) throws SyscallException {
        call("ioctl(FICLONE) " + source.path() + " to " + destination.path(),
                () -> libc.ioctl(destination.number(), NativeLong.valueOf(FICLONE), NativeLong.valueOf(source.number())));
    }

    /**
     * copy_file_range(2) of {@code length} bytes at {@code offset} in both files, in the kernel
     * (shared extents where the filesystem can); loops over short copies. A source that ends
     * before the range does is EIO here: the caller asked for data that is not there.
     */
    public void copyRange(FileDescriptor source, FileDescriptor destination, long offset, long length) throws SyscallException {
        Pointer in = Memory.allocateDirect(runtime, Long.BYTES, true);
        Pointer out = Memory.allocateDirect(runtime, Long.BYTES, true);
        in.putLong(0, offset);
        out.putLong(0, offset);
        String what = "copy_file_range " + source.path() + " to " + destination.path();
        long left = length;
        while (left > 0) {
            long copied = libc.copy_file_range(source.number(), in, destination.number(), out, left, 0);
            if (copied == -1) {
                throw new SyscallException(what, runtime.getLastError());
            }
            if (copied == 0) {
                throw new SyscallException(what + " (source ends early)", Errno.EIO.intValue());
            }
            left -= copied;
        }
    }

    /**
     * The names of the extended attributes of the file {@code fd} is open on (flistxattr(2)),
     * POSIX ACLs (system.posix_acl_*) and NFSv4 ACLs (system.nfs4_acl) among them; none on a
     * filesystem without them.
     */
    public List<String> xattrNames(FileDescriptor fd) throws SyscallException {
        while (true) {
            long size = libc.flistxattr(fd.number(), null, 0);
            if (size == -1) {
                int errno = runtime.getLastError();
                if (errno == Errno.EOPNOTSUPP.intValue()) {
                    return List.of();
                }
                throw new SyscallException("flistxattr " + fd.path(), errno);
            }
            if (size == 0) {
                return List.of();
            }
            Pointer list = Memory.allocateDirect(runtime, (int) size, true);
            long read = libc.flistxattr(fd.number(), list, size);
            if (read == -1 && runtime.getLastError() == Errno.ERANGE.intValue()) {
                continue; // one was added since the size was asked
            }
            if (read == -1) {
                throw new SyscallException("flistxattr " + fd.path(), runtime.getLastError());
            }
            List<String> names = new ArrayList<>();
            int start = 0;
            for (int i = 0; i < read; i++) {
                if (list.getByte(i) == 0) {
                    names.add(list.getString(start, i - start, StandardCharsets.UTF_8));
                    start = i + 1;
                }
            }
            return names;
        }
    }

    /** The value of the extended attribute {@code name} (fgetxattr(2)); empty when it is gone. */
    public Optional<byte[]> xattr(FileDescriptor fd, String name) throws SyscallException {
        while (true) {
            long size = libc.fgetxattr(fd.number(), name, null, 0);
            if (size == -1) {
                int errno = runtime.getLastError();
                if (errno == Errno.ENODATA.intValue()) {
                    return Optional.empty();
                }
                throw new SyscallException("fgetxattr " + name + " of " + fd.path(), errno);
            }
            Pointer value = Memory.allocateDirect(runtime, (int) Math.max(1, size), true);
            long read = libc.fgetxattr(fd.number(), name, value, size);
            if (read == -1 && runtime.getLastError() == Errno.ERANGE.intValue()) {
                continue; // it grew since its size was asked
            }
            if (read == -1) {
                int errno = runtime.getLastError();
                if (errno == Errno.ENODATA.intValue()) {
                    return Optional.empty();
                }
                throw new SyscallException("fgetxattr " + name + " of " + fd.path(), errno);
            }
            byte[] bytes = new byte[(int) read];
            value.get(0, bytes, 0, bytes.length);
            return Optional.of(bytes);
        }
    }

    /** fsetxattr(2): sets the extended attribute {@code name}, made or replaced. */
    public void setXattr(FileDescriptor fd, String name, byte[] value) throws SyscallException {
        Pointer memory = Memory.allocateDirect(runtime, Math.max(1, value.length), true);
        memory.put(0, value, 0, value.length);
        call("fsetxattr " + name + " of " + fd.path(), () -> libc.fsetxattr(fd.number(), name, memory, value.length, 0));
    }

    /** Makes a block device node, mode {@code permissions}, for the device {@code number}. */
    public void mknodBlock(String path, int permissions, DeviceNumber number) throws SyscallException {
        call("mknod " + path, () -> libc.mknod(path, S_IFBLK | permissions, makedev(number)));
    }

    /**
     * flock(2) with LOCK_EX | LOCK_NB: true when this open file now holds the exclusive lock, false
     * when another open file (of this or another process) holds it. On NFS the client takes it as
     * an fcntl lock on the whole file at the server, so it holds between hosts too.
     */
    public boolean tryLockExclusive(FileDescriptor fd) throws SyscallException {
        if (libc.flock(fd.number(), LOCK_EX | LOCK_NB) == 0) {
            return true;
        }
        int errno = runtime.getLastError();
        if (errno == Errno.EWOULDBLOCK.intValue() || errno == Errno.EAGAIN.intValue()) {
            return false;
        }
        throw new SyscallException("flock " + fd.path(), errno);
    }

    /** umask(2): sets the process's file mode creation mask, returns the previous one. */
    public int umask(int mask) {
        return libc.umask(mask);
    }

    /** The 512-byte blocks allocated to {@code path} (st_blocks), whatever the filesystem's block size. */
    public long allocatedBlocks(String path) throws SyscallException {
        Pointer statx = Memory.allocateDirect(runtime, STATX_SIZE, true);
        call("statx " + path, () -> libc.statx(AT_FDCWD, path, 0, STATX_BLOCKS, statx));
        if ((statx.getInt(0) & STATX_BLOCKS) == 0) {
            throw new SyscallException("statx " + path + " (no block count)", Errno.EOPNOTSUPP.intValue());
        }
        return statx.getLong(STATX_BLOCKS_OFFSET);
    }

    /** Which file a descriptor is open on: its device and inode, as statx(2) gives them (a removed file too). */
    public FileIdentity identity(FileDescriptor fd) throws SyscallException {
        Pointer statx = Memory.allocateDirect(runtime, STATX_SIZE, true);
        call("statx " + fd.path(), () -> libc.statx(fd.number(), "", AT_EMPTY_PATH, STATX_INO, statx));
        return new FileIdentity(new DeviceNumber(statx.getInt(STATX_DEV_MAJOR_OFFSET), statx.getInt(STATX_DEV_MAJOR_OFFSET + 4)),
                statx.getLong(STATX_INO_OFFSET));
    }

    void close(int fd) {
        try {
            call("close", () -> libc.close(fd));
        } catch (SyscallException ignored) {
            // see FileDescriptor.close
        }
    }

    /** dev_t as glibc's makedev(3) packs it: 12 bits of major and 20 of minor, split. */
    static long makedev(DeviceNumber number) {
        long major = number.major() & 0xffffffffL;
        long minor = number.minor() & 0xffffffffL;
        return ((major & 0xfffff000L) << 32) | ((major & 0xfffL) << 8) | ((minor & 0xffffff00L) << 12) | (minor & 0xffL);
    }

    private int call(String name, IntSupplier syscall) throws SyscallException {
        int result = syscall.getAsInt();
        if (result == -1) {
            // errno is per thread: read on the thread that made the call, right after it.
            throw new SyscallException(name, runtime.getLastError());
        }
        return result;
    }
}
