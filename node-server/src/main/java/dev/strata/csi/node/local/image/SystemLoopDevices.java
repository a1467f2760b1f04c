package dev.strata.csi.node.local.image;

import dev.strata.csi.linux.FileDescriptor;
import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.linux.SyscallException;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.DeviceHolders;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import jnr.constants.platform.Errno;

/**
 * {@link LoopDevices} with the loop driver's ioctls, as losetup(8) makes them but without a process
 * per call, and sysfs to look: the kernel's own account in {@code /sys/block/loopN}. Attaching asks
 * {@code /dev/loop-control} for a free device and configures it in one LOOP_CONFIGURE (kernel 5.8
 * and later), else with LOOP_SET_FD and LOOP_SET_STATUS64; detaching is LOOP_CLR_FD. No device
 * gets the autoclear flag: a device stays attached until it is detached, whoever closes it. Which
 * image a device holds is told by LOOP_GET_STATUS64's device and inode numbers of the backing
 * file ({@link FileIdentity}), never by the path sysfs shows.
 */
public final class SystemLoopDevices implements LoopDevices {

    // linux/loop.h
    private static final long LOOP_SET_FD = 0x4C00;
    private static final long LOOP_CLR_FD = 0x4C01;
    private static final long LOOP_SET_STATUS64 = 0x4C04;
    private static final long LOOP_GET_STATUS64 = 0x4C05;
    private static final long LOOP_SET_CAPACITY = 0x4C07;
    private static final long LOOP_SET_DIRECT_IO = 0x4C08;
    private static final long LOOP_CONFIGURE = 0x4C0A;
    private static final long LOOP_CTL_GET_FREE = 0x4C82;
    private static final int LO_FLAGS_DIRECT_IO = 16;
    /** The logical sector size of every loop device the driver attaches. */
    private static final int LOGICAL_SECTOR_BYTES = 512;

    /** Another process can take the free device between asking for it and configuring it; then ask again. */
    private static final int ATTACH_ATTEMPTS = 8;
    /** LOOP_SET_STATUS64 asks to be retried while the page cache of the device is being dropped. */
    private static final int SET_STATUS_ATTEMPTS = 16;
    private static final Pattern LOOP = Pattern.compile("loop(\\d+)");
    /** What the kernel appends to a path whose file has been unlinked. */
    private static final String DELETED = " (deleted)";
    private static final long SECTOR_BYTES = 512;
    /** How long a detached device may take to let go of its image. */
    private static final Duration DETACH_SETTLE = Duration.ofSeconds(1);

    /** How a device came out of an attempt to attach an image to it. */
    private enum Outcome { ATTACHED, TAKEN, REFUSED }

    private final Kernel kernel;
    private final Path sysBlock;
    private final Path dev;
    private final boolean loopConfigure;

    public SystemLoopDevices(Kernel kernel) {
        this(kernel, Path.of("/sys/block"), Path.of("/dev"), true);
    }

    /**
     * With {@code sysBlock} and {@code dev} elsewhere, for tests that lay out a sysfs of their own;
     * without {@code loopConfigure}, attaching takes the path of kernels older than 5.8.
     */
    SystemLoopDevices(Kernel kernel, Path sysBlock, Path dev, boolean loopConfigure) {
        this.kernel = kernel;
        this.sysBlock = sysBlock;
        this.dev = dev;
        this.loopConfigure = loopConfigure;
    }

    @Override
    public LoopDevice attach(Path image) throws DeviceException {
        String file = image.toAbsolutePath().normalize().toString();
        if (!Files.isRegularFile(image)) {
            throw new DeviceException("cannot attach " + file + ": not a regular file");
        }
        for (int attempt = 0; attempt < ATTACH_ATTEMPTS; attempt++) {
            String name = "loop" + freeNumber(file);
            if (attachTo(name, file)) {
                return describe(name).orElseThrow(() -> new DeviceException(
                        "attached " + file + " to " + dev.resolve(name) + ", but sysfs shows it detached"));
            }
        }
        throw new DeviceException("cannot attach " + file + ": other processes took the free loop device "
                + ATTACH_ATTEMPTS + " times in a row");
    }

    @Override
    public List<DeviceNumber> holders(LoopDevice device) throws DeviceException {
        return DeviceHolders.of(device.deviceNumber());
    }

    @Override
    public void detach(Path device) throws DeviceException {
        String name = name(device);
        if (describe(name).isEmpty()) {
            return;
        }
        try (FileDescriptor loop = kernel.open(deviceNode(name).toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC)) {
            kernel.ioctl(loop, "LOOP_CLR_FD", LOOP_CLR_FD, 0);
        } catch (SyscallException e) {
            // ENXIO: nothing is attached any more; someone detached it since we looked.
            if (!e.is(Errno.ENXIO) && describe(name).isPresent()) {
                throw new DeviceException("detach " + device + ": " + e.getMessage(), e);
            }
        }
        // The kernel defers the detach of a device that is still open or mounted (it sets
        // autoclear), and reports success all the same.
        long deadline = System.nanoTime() + DETACH_SETTLE.toNanos();
        while (describe(name).isPresent()) {
            if (System.nanoTime() > deadline) {
                throw new DeviceException(device + " is still in use (mounted or held open); "
                        + "the kernel will detach it when it is last closed");
            }
            pause();
        }
    }

    @Override
    public List<LoopDevice> list() throws DeviceException {
        List<LoopDevice> attached = new ArrayList<>();
        for (String name : loopNames()) {
            describe(name).ifPresent(attached::add);
        }
        return attached;
    }

    @Override
    public void refreshCapacity(Path device) throws DeviceException {
        String name = name(device);
        try (FileDescriptor loop = kernel.open(deviceNode(name).toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC)) {
            kernel.ioctl(loop, "LOOP_SET_CAPACITY", LOOP_SET_CAPACITY, 0);
        } catch (SyscallException e) {
            throw new DeviceException("refresh the size of " + device + ": " + e.getMessage(), e);
        }
    }

    @Override
    public long sizeBytes(Path device) throws DeviceException {
        String name = name(device);
        String sectors = read(sysBlock.resolve(name).resolve("size"))
                .orElseThrow(() -> new DeviceException("no loop device " + device));
        try {
            return Long.parseLong(sectors) * SECTOR_BYTES;
        } catch (NumberFormatException e) {
            throw new DeviceException("unexpected size of " + device + " in sysfs: " + sectors, e);
        }
    }

    /** The loop devices the kernel has, attached or not, by number. */
    private List<String> loopNames() throws DeviceException {
        List<String> names = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(sysBlock, "loop*")) {
            for (Path entry : entries) {
                String name = entry.getFileName().toString();
                if (LOOP.matcher(name).matches()) {
                    names.add(name);
                }
            }
        } catch (IOException e) {
            throw new DeviceException("cannot list " + sysBlock + ": " + e.getMessage(), e);
        }
        names.sort(Comparator.comparingInt(SystemLoopDevices::number));
        return names;
    }

    /**
     * The device {@code loopN} as sysfs and LOOP_GET_STATUS64 show it, or empty if it is not
     * attached. A device another process detaches meanwhile answers ENODEV for its sysfs entries
     * until the kernel removes them; whether it is still attached is then asked of the device
     * itself (its errno exact), and one attached again at once is read afresh.
     */
    private Optional<LoopDevice> describe(String name) throws DeviceException {
        for (int attempt = 1; ; attempt++) {
            try {
                return describeOnce(name);
            } catch (DeviceException e) {
                if (backing(name).isEmpty()) {
                    return Optional.empty();
                }
                if (attempt == 3) {
                    throw e;
                }
            }
        }
    }

    private Optional<LoopDevice> describeOnce(String name) throws DeviceException {
        Path sys = sysBlock.resolve(name);
        // sysfs has loopN/loop only while a file is attached; a scan meets mostly free devices,
        // which this answers without the exception a failed read costs.
        if (!Files.isDirectory(sys.resolve("loop"))) {
            return Optional.empty();
        }
        Optional<String> shown = read(sys.resolve("loop/backing_file"));
        if (shown.isEmpty()) {
            return Optional.empty();
        }
        String file = shown.get();
        boolean deleted = file.endsWith(DELETED);
        if (deleted) {
            file = file.substring(0, file.length() - DELETED.length());
        }
        Optional<String> number = read(sys.resolve("dev"));
        Optional<String> dio = read(sys.resolve("loop/dio"));
        Optional<FileIdentity> backing = backing(name);
        if (number.isEmpty() || dio.isEmpty() || backing.isEmpty()) {
            return Optional.empty(); // detached while we looked
        }
        try {
            return Optional.of(new LoopDevice(dev.resolve(name), Path.of(file), backing.get(), deleted,
                    DeviceNumber.parse(number.get()), dio.get().equals("1")));
        } catch (IllegalArgumentException e) {
            throw new DeviceException("unexpected sysfs entry for " + name + ": " + e.getMessage(), e);
        }
    }

    /** The backing file's device and inode numbers (LOOP_GET_STATUS64), or empty if nothing is attached. */
    private Optional<FileIdentity> backing(String name) throws DeviceException {
        if (!Files.isDirectory(sysBlock.resolve(name).resolve("loop"))) {
            return Optional.empty(); // detached, or the device removed, since sysfs was read
        }
        try (FileDescriptor loop = kernel.open(deviceNode(name).toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC)) {
            LoopConfig.LoopInfo64 info = kernel.allocate(new LoopConfig.LoopInfo64(kernel.runtime()));
            kernel.ioctl(loop, "LOOP_GET_STATUS64", LOOP_GET_STATUS64, info);
            return Optional.of(new FileIdentity(FileIdentity.decode(info.device.get()), info.inode.get()));
        } catch (SyscallException e) {
            // Detached (ENXIO) or removed (ENOENT, ENODEV) by another process since sysfs was read.
            if (e.is(Errno.ENXIO) || e.is(Errno.ENOENT) || e.is(Errno.ENODEV)) {
                return Optional.empty();
            }
            // A device this process may not open (a container's device rules, a nodev /dev): not
            // one it attached, and none it could use or detach. sysfs shows every device of the
            // host, such as those of other containers while the image trains its AOT cache.
            if (e.is(Errno.EPERM) || e.is(Errno.EACCES)) {
                return Optional.empty();
            }
            throw new DeviceException("cannot read the status of " + dev.resolve(name) + ": " + e.getMessage(), e);
        }
    }

    /**
     * The number of a free loop device, which {@code /dev/loop-control} adds if none is left. In a
     * container whose /dev lacks loop-control, the lowest device sysfs shows unattached.
     */
    private int freeNumber(String file) throws DeviceException {
        try (FileDescriptor control = kernel.open(dev.resolve("loop-control").toString(), Kernel.O_RDWR | Kernel.O_CLOEXEC)) {
            return kernel.ioctl(control, "LOOP_CTL_GET_FREE", LOOP_CTL_GET_FREE, 0);
        } catch (SyscallException e) {
            if (!e.is(Errno.ENOENT)) {
                throw new DeviceException("cannot attach " + file + ": no free loop device: " + e.getMessage(), e);
            }
        }
        for (String name : loopNames()) {
            if (describe(name).isEmpty()) {
                return number(name);
            }
        }
        throw new DeviceException("cannot attach " + file + ": every loop device is in use, and there is no "
                + dev.resolve("loop-control") + " to add one");
    }

    /** Attaches {@code file} to {@code name}; false when another process attached something to it first. */
    private boolean attachTo(String name, String file) throws DeviceException {
        Path node = deviceNode(name);
        String what = "attach " + file + " to " + node;
        try (FileDescriptor loop = kernel.open(node.toString(), Kernel.O_RDWR | Kernel.O_CLOEXEC)) {
            // Direct I/O first (no double caching in the page cache), buffered where the image's
            // filesystem cannot open files for direct I/O or the kernel refuses it for the device.
            for (boolean directIo : Kernel.O_DIRECT != 0 ? List.of(true, false) : List.of(false)) {
                FileDescriptor backing;
                try {
                    backing = openBacking(file, directIo);
                } catch (SyscallException e) {
                    if (directIo && e.is(Errno.EINVAL)) {
                        continue;
                    }
                    throw new DeviceException(what + ": " + e.getMessage(), e);
                }
                try (backing) {
                    Outcome outcome = loopConfigure ? configure(loop, backing, file, directIo) : Outcome.REFUSED;
                    if (outcome == Outcome.REFUSED && !directIo) {
                        outcome = setFd(loop, backing, file); // a kernel before 5.8, which has no LOOP_CONFIGURE
                    }
                    if (outcome != Outcome.REFUSED) {
                        return outcome == Outcome.ATTACHED;
                    }
                }
            }
            throw new DeviceException(what + ": the kernel refused the image");
        } catch (SyscallException e) {
            throw new DeviceException(what + ": " + e.getMessage(), e);
        }
    }

    /**
     * The image, opened for reading and writing, or read-only where it cannot be written (the
     * device is then read-only too), as losetup opens it.
     */
    private FileDescriptor openBacking(String file, boolean directIo) throws SyscallException {
        int flags = Kernel.O_CLOEXEC | (directIo ? Kernel.O_DIRECT : 0);
        try {
            return kernel.open(file, Kernel.O_RDWR | flags);
        } catch (SyscallException e) {
            if (e.is(Errno.EROFS) || e.is(Errno.EACCES)) {
                return kernel.open(file, Kernel.O_RDONLY | flags);
            }
            throw e;
        }
    }

    /** LOOP_CONFIGURE: the device gets the file, its name and direct I/O in one step. */
    private Outcome configure(FileDescriptor loop, FileDescriptor backing, String file, boolean directIo) throws SyscallException {
        LoopConfig config = kernel.allocate(new LoopConfig(kernel.runtime()));
        config.fd.set(backing.number());
        // 512-byte sectors always, as LOOP_SET_FD gives them: left to the kernel, the sector size
        // follows the file's direct I/O alignment, which changes under an image (xfs asks 4096 of
        // a file once it shares extents with a reflinked snapshot or clone, btrfs always does),
        // and a filesystem made with smaller blocks or sectors (ext4's 1 KiB blocks on a small
        // volume, xfs's 512-byte sectors) would then no longer mount. Where the file's alignment
        // is larger the kernel refuses direct I/O, and the device is buffered.
        config.blockSize.set(LOGICAL_SECTOR_BYTES);
        config.info.flags.set(directIo ? LO_FLAGS_DIRECT_IO : 0);
        config.info.fileName(file);
        try {
            kernel.ioctl(loop, "LOOP_CONFIGURE", LOOP_CONFIGURE, config);
            return Outcome.ATTACHED;
        } catch (SyscallException e) {
            if (e.is(Errno.EBUSY)) {
                return Outcome.TAKEN;
            }
            // Refused direct I/O for this file, or (EINVAL before 5.8, ENOTTY) no such ioctl.
            if (e.is(Errno.EINVAL) || e.is(Errno.ENOTTY)) {
                return Outcome.REFUSED;
            }
            throw e;
        }
    }

    /**
     * LOOP_SET_FD, then LOOP_SET_STATUS64 for the name and LOOP_SET_DIRECT_IO, which may be refused
     * (the device then stays buffered, as losetup leaves it). A device whose status cannot be set
     * is detached again.
     */
    private Outcome setFd(FileDescriptor loop, FileDescriptor backing, String file) throws SyscallException {
        try {
            kernel.ioctl(loop, "LOOP_SET_FD", LOOP_SET_FD, backing.number());
        } catch (SyscallException e) {
            if (e.is(Errno.EBUSY)) {
                return Outcome.TAKEN;
            }
            throw e;
        }
        try {
            LoopConfig.LoopInfo64 info = kernel.allocate(new LoopConfig.LoopInfo64(kernel.runtime()));
            info.fileName(file);
            for (int attempt = 1; ; attempt++) {
                try {
                    kernel.ioctl(loop, "LOOP_SET_STATUS64", LOOP_SET_STATUS64, info);
                    break;
                } catch (SyscallException e) {
                    if (!e.is(Errno.EAGAIN) || attempt == SET_STATUS_ATTEMPTS) {
                        throw e;
                    }
                }
            }
        } catch (SyscallException e) {
            try {
                kernel.ioctl(loop, "LOOP_CLR_FD", LOOP_CLR_FD, 0);
            } catch (SyscallException undo) {
                e.addSuppressed(undo);
            }
            throw e;
        }
        if (Kernel.O_DIRECT != 0) {
            try {
                kernel.ioctl(loop, "LOOP_SET_DIRECT_IO", LOOP_SET_DIRECT_IO, 1);
            } catch (SyscallException e) {
                // the image's filesystem or its alignment does not allow it: buffered I/O
            }
        }
        return Outcome.ATTACHED;
    }

    /**
     * {@code /dev/loopN}, which devtmpfs creates when the kernel adds the device. A container with
     * a /dev of its own may lack it; then, and only then, the node is made here.
     */
    private Path deviceNode(String name) throws DeviceException {
        Path node = dev.resolve(name);
        if (Files.exists(node)) {
            return node;
        }
        DeviceNumber number = read(sysBlock.resolve(name).resolve("dev")).map(DeviceNumber::parse)
                .orElseThrow(() -> new DeviceException("no loop device " + name + " in " + sysBlock));
        try {
            kernel.mknodBlock(node.toString(), 0600, number);
        } catch (SyscallException e) {
            if (!e.is(Errno.EEXIST)) { // someone else made it first
                throw new DeviceException("cannot make the device node " + node + ": " + e.getMessage(), e);
            }
        }
        return node;
    }

    private static Optional<String> read(Path file) throws DeviceException {
        try {
            String text = Files.readString(file);
            // sysfs ends each value with a newline; a path may end in other white space.
            return Optional.of(text.endsWith("\n") ? text.substring(0, text.length() - 1) : text);
        } catch (NoSuchFileException e) {
            return Optional.empty();
        } catch (IOException e) {
            throw new DeviceException("cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /** {@code loopN} from {@code /dev/loopN}; anything else is not a loop device. */
    private static String name(Path device) throws DeviceException {
        String name = device.getFileName() == null ? "" : device.getFileName().toString();
        if (!LOOP.matcher(name).matches()) {
            throw new DeviceException(device + " is not a loop device");
        }
        return name;
    }

    private static int number(String name) {
        Matcher matcher = LOOP.matcher(name);
        return matcher.matches() ? Integer.parseInt(matcher.group(1)) : Integer.MAX_VALUE;
    }

    /** Short: the kernel usually lets go within a millisecond or two, and every caller waits for it. */
    private static void pause() throws DeviceException {
        try {
            Thread.sleep(2);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DeviceException("interrupted while waiting for a loop device to detach", e);
        }
    }
}
