package dev.strata.csi.node.mount;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountTable;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * An in-memory stand-in for {@link SystemMounter}, for unit tests without root: a mount table that
 * mount, bind mounts and unmounts change as mount(2) and umount(2) would, read back through
 * {@link MountTable} from mountinfo lines as the kernel writes them. A mount needs an existing
 * target (a directory, or for a bind of a file a file); a block device source must be one of the
 * devices {@link #addDevice} made (the loop devices of {@code InMemoryLoopDevices}); a stacked
 * mount sits on the one below (its parent), and unmount takes the top one. A bind mount of a
 * device node shows as the kernel shows it: devtmpfs, its root the node's name in /dev.
 *
 * <p>Where it differs: nothing appears below a target (its files are the directory's own), and
 * no filesystem type or option is checked. Failures: {@link #failNext} fails the next call of one
 * kind before it acts; {@link #holdOpen} makes a mount busy (a process with a file open in it),
 * so unmount fails as umount(2) does with EBUSY, as it does for a mount with mounts below it.
 */
public final class InMemoryMounter implements Mounter {

    /** Where /dev is mounted: what a bind mount of a device node reports as its device. */
    static final DeviceNumber DEVTMPFS = new DeviceNumber(0, 5);
    private static final MountPoint ROOT = new MountPoint(1, 0, new DeviceNumber(254, 1), "/", Path.of("/"), List.of("rw", "relatime"),
            "ext4", "/dev/vda1", List.of("rw"));

    private final List<MountPoint> mounts = new ArrayList<>(List.of(ROOT));
    private final Map<Path, DeviceNumber> devices = new HashMap<>();
    private final Set<Path> open = new HashSet<>();
    private final Set<String> failNext = new HashSet<>();
    private int nextId = 100;
    /** Filesystems without a device (tmpfs and the like) get numbers of major 0, as the kernel's anonymous ones. */
    private int nextAnonymous = 60;

    /** A block device appears in /dev: mounts of {@code device} report {@code number}. */
    public synchronized void addDevice(Path device, DeviceNumber number) {
        devices.put(device, number);
    }

    /** The block device is gone from /dev (a loop device detached). */
    public synchronized void removeDevice(Path device) {
        devices.remove(device);
    }

    /** The next call of {@code call} (mount, bind, unmount or table) fails before it acts. */
    public synchronized void failNext(String call) {
        failNext.add(call);
    }

    /** A process holds a file open in the mount at {@code target} (or lets go): its unmount fails with EBUSY meanwhile. */
    public synchronized void holdOpen(Path target, boolean held) {
        if (held) {
            open.add(normalize(target));
        } else {
            open.remove(normalize(target));
        }
    }

    @Override
    public synchronized void mount(String source, Path target, String fsType, List<String> options) throws MountException {
        String what = "mount " + source + " on " + target;
        fail("mount", what);
        if (!Files.isDirectory(target)) {
            throw new MountException(what + ": mount point " + target + " does not exist: No such file or directory");
        }
        DeviceNumber number;
        if (source.startsWith("/")) {
            number = devices.get(Path.of(source));
            if (number == null) {
                throw new MountException(what + ": source " + source + " does not exist: No such file or directory");
            }
        } else {
            number = new DeviceNumber(0, nextAnonymous++);
        }
        boolean readOnly = options.contains("ro");
        add(number, "/", target, readOnly, fsType, source, List.of(readOnly ? "ro" : "rw"));
    }

    @Override
    public synchronized void bindMount(Path source, Path target, boolean readOnly) throws MountException {
        String what = "bind mount " + source + " on " + target;
        fail("bind", what);
        if (!Files.exists(source) && !devices.containsKey(source) || !Files.exists(target)) {
            throw new MountException(what + ": " + (Files.exists(target) ? source : target) + " does not exist: No such file or directory");
        }
        if (devices.containsKey(source)) {
            if (Files.isDirectory(target)) {
                throw new MountException(what + ": one of " + source + " and " + target + " is a directory and the other is not: Not a directory");
            }
            add(DEVTMPFS, "/" + source.getFileName(), target, readOnly, "devtmpfs", "udev", List.of("rw"));
            return;
        }
        if (Files.isDirectory(source) != Files.isDirectory(target)) {
            throw new MountException(what + ": one of " + source + " and " + target + " is a directory and the other is not: Not a directory");
        }
        // The filesystem that holds the source, and where in it the source lies.
        MountPoint holder = holder(normalize(source));
        Path inside = holder.mountPoint().relativize(normalize(source));
        String root = inside.toString().isEmpty() ? holder.root() : Path.of(holder.root()).resolve(inside).toString();
        add(holder.device(), root, target, readOnly, holder.fsType(), holder.source(), holder.superOptions());
    }

    @Override
    public synchronized void unmount(Path target) throws MountException {
        fail("unmount", "umount " + target);
        Path path = normalize(target);
        Optional<MountPoint> top = MountTable.parse(mountinfo()).at(path);
        if (top.isEmpty()) {
            return;
        }
        boolean below = mounts.stream().anyMatch(m -> m.parentId() == top.get().id() && !m.mountPoint().equals(path));
        if (open.contains(path) || below) {
            throw new MountException("umount " + target + ": target is busy (files open or mounts below it): Device or resource busy");
        }
        mounts.removeIf(m -> m.id() == top.get().id());
    }

    @Override
    public synchronized MountTable table() throws MountException {
        fail("table", "read /proc/self/mountinfo");
        return MountTable.parse(mountinfo());
    }

    private void add(DeviceNumber device, String root, Path target, boolean readOnly, String fsType, String source, List<String> superOptions) {
        Path path = normalize(target);
        MountPoint parent = MountTable.parse(mountinfo()).at(path).orElseGet(() -> holder(path));
        mounts.add(new MountPoint(nextId++, parent.id(), device, root, path, List.of(readOnly ? "ro" : "rw", "relatime"), fsType, source,
                superOptions));
    }

    /** The mount whose filesystem holds {@code path}: the last one listed at the longest mount point above it. */
    private MountPoint holder(Path path) {
        MountPoint found = ROOT;
        for (MountPoint mount : mounts) {
            if (path.startsWith(mount.mountPoint()) && mount.mountPoint().getNameCount() >= found.mountPoint().getNameCount()) {
                found = mount;
            }
        }
        return found;
    }

    private void fail(String call, String what) throws MountException {
        if (failNext.remove(call)) {
            throw new MountException(what + ": injected failure of " + call);
        }
    }

    private String mountinfo() {
        StringBuilder text = new StringBuilder();
        for (MountPoint m : mounts) {
            text.append(m.id()).append(' ').append(m.parentId()).append(' ').append(m.device()).append(' ').append(escape(m.root()))
                    .append(' ').append(escape(m.mountPoint().toString())).append(' ').append(String.join(",", m.options()))
                    .append(" shared:1 - ").append(m.fsType()).append(' ').append(escape(m.source())).append(' ')
                    .append(String.join(",", m.superOptions())).append('\n');
        }
        return text.toString();
    }

    /** As the kernel writes paths in mountinfo: space, tab, newline and backslash as three octal digits. */
    private static String escape(String field) {
        return field.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011").replace("\n", "\\012");
    }

    private static Path normalize(Path path) {
        return path.toAbsolutePath().normalize();
    }
}
