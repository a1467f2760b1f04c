package dev.strata.csi.backend.local;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.system.Commands;
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

/**
 * {@link LoopDevices} with losetup(8) to attach and detach, and sysfs to look: the kernel's own
 * account in {@code /sys/block/loopN}, rather than losetup's output, which is meant for people.
 */
public final class SystemLoopDevices implements LoopDevices {

    private static final Duration TIMEOUT = Duration.ofMinutes(1);
    private static final Pattern LOOP = Pattern.compile("loop(\\d+)");
    /** What the kernel appends to a path whose file has been unlinked. */
    private static final String DELETED = " (deleted)";
    private static final long SECTOR_BYTES = 512;
    /** How long a detached device may take to let go of its image. */
    private static final Duration DETACH_SETTLE = Duration.ofSeconds(1);

    /** A device as sysfs shows it; {@code deleted} if its image has been unlinked since. */
    private record Attached(LoopDevice device, boolean deleted) {}

    private final Commands commands;
    private final Path sysBlock;
    private final Path dev;

    public SystemLoopDevices(Commands commands) {
        this(commands, Path.of("/sys/block"), Path.of("/dev"));
    }

    /** With {@code sysBlock} and {@code dev} elsewhere, for tests that lay out a sysfs of their own. */
    SystemLoopDevices(Commands commands, Path sysBlock, Path dev) {
        this.commands = commands;
        this.sysBlock = sysBlock;
        this.dev = dev;
    }

    @Override
    public LoopDevice attach(Path image) throws DeviceException {
        String file = image.toAbsolutePath().normalize().toString();
        if (!Files.isRegularFile(image)) {
            throw new DeviceException("cannot attach " + file + ": not a regular file");
        }
        String device = attachTo(file);
        if (device.isEmpty()) {
            // In a container with its own /dev the next free device may have no node yet; make it
            // and try once more. (Should another attach take that device first, losetup moves on.)
            ensureNextDeviceNode();
            device = attachTo(file);
        }
        if (device.isEmpty()) {
            check(run("losetup", "--find", "--show", file), "losetup --find --show " + file);
            throw new DeviceException("losetup --find --show " + file + " named no device");
        }
        Path node = Path.of(device);
        return describe(name(node)).map(Attached::device)
                .orElseThrow(() -> new DeviceException("losetup attached " + file + " to " + node + ", but sysfs shows it detached"));
    }

    @Override
    public void detach(Path device) throws DeviceException {
        String name = name(device);
        if (describe(name).isEmpty()) {
            return;
        }
        CommandResult result = run("losetup", "--detach", dev.resolve(name).toString());
        if (!result.succeeded() && describe(name).isPresent()) {
            check(result, "losetup --detach " + device);
        }
        // The kernel defers the detach of a device that is still open or mounted (autoclear);
        // losetup reports success all the same.
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
    public Optional<LoopDevice> find(Path image) throws DeviceException {
        Path file;
        try {
            file = image.toRealPath();
        } catch (NoSuchFileException e) {
            return Optional.empty();
        } catch (IOException e) {
            throw new DeviceException("cannot resolve " + image + ": " + e.getMessage(), e);
        }
        // A device whose image was deleted is not attached to a new file at the same path.
        return attached().stream().filter(a -> !a.deleted() && a.device().backingFile().equals(file))
                .map(Attached::device).findFirst();
    }

    @Override
    public List<LoopDevice> list() throws DeviceException {
        return attached().stream().map(Attached::device).toList();
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

    private List<Attached> attached() throws DeviceException {
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
        List<Attached> attached = new ArrayList<>();
        for (String name : names) {
            describe(name).ifPresent(attached::add);
        }
        return attached;
    }

    /** The device {@code loopN} as sysfs shows it, or empty if it is not attached. */
    private Optional<Attached> describe(String name) throws DeviceException {
        Path sys = sysBlock.resolve(name);
        Optional<String> backing = read(sys.resolve("loop/backing_file"));
        if (backing.isEmpty()) {
            return Optional.empty();
        }
        String file = backing.get();
        boolean deleted = file.endsWith(DELETED);
        if (deleted) {
            file = file.substring(0, file.length() - DELETED.length());
        }
        Optional<String> number = read(sys.resolve("dev"));
        Optional<String> dio = read(sys.resolve("loop/dio"));
        if (number.isEmpty() || dio.isEmpty()) {
            return Optional.empty(); // detached while we looked
        }
        try {
            return Optional.of(new Attached(new LoopDevice(dev.resolve(name), Path.of(file),
                    DeviceNumber.parse(number.get()), dio.get().equals("1")), deleted));
        } catch (IllegalArgumentException e) {
            throw new DeviceException("unexpected sysfs entry for " + name + ": " + e.getMessage(), e);
        }
    }

    /** The device {@code file} was attached to, or empty when losetup attached nothing. */
    private String attachTo(String file) throws DeviceException {
        String device = run("losetup", "--find", "--show", "--direct-io=on", file).stdout().strip();
        // Direct I/O needs the image's filesystem to support it (ramfs, older tmpfs do not). Newer
        // losetup then attaches nothing; older ones attach without it, print the device and fail.
        if (device.isEmpty()) {
            device = run("losetup", "--find", "--show", file).stdout().strip();
        }
        return device;
    }

    /**
     * losetup opens {@code /dev/loopN}, which devtmpfs creates when the kernel adds the device. A
     * container with a /dev of its own may lack it; then, and only then, the node is made here.
     * {@code losetup --find} names the next free device and has the kernel add it if need be.
     */
    private void ensureNextDeviceNode() throws DeviceException {
        String next = check(run("losetup", "--find"), "losetup --find").stdout().strip();
        String name = name(Path.of(next));
        Path node = dev.resolve(name);
        if (Files.exists(node)) {
            return;
        }
        DeviceNumber number = read(sysBlock.resolve(name).resolve("dev")).map(DeviceNumber::parse)
                .orElseThrow(() -> new DeviceException("losetup --find named " + next + ", which sysfs does not know"));
        CommandResult made = run("mknod", "-m", "0600", node.toString(), "b",
                Integer.toString(number.major()), Integer.toString(number.minor()));
        if (!Files.exists(node)) { // someone else may have made it first
            check(made, "mknod " + node);
        }
    }

    private CommandResult run(String... argv) throws DeviceException {
        try {
            return commands.run(TIMEOUT, argv);
        } catch (CommandException e) {
            throw new DeviceException(e.getMessage(), e);
        }
    }

    private static CommandResult check(CommandResult result, String what) throws DeviceException {
        try {
            return result.check(what);
        } catch (CommandException e) {
            throw new DeviceException(e.getMessage(), e);
        }
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
