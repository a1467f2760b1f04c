package dev.strata.csi.mount;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * The mounts this process sees, from {@code /proc/self/mountinfo}: the driver's one reader of the
 * mount table. Paths are compared as the kernel lists them, with symlinks resolved, which is how
 * mount(8) records a target; they are not resolved here because stat on a dead network mount can hang.
 */
public final class MountTable {

    private static final Path MOUNTINFO = Path.of("/proc/self/mountinfo");

    /** A table that changes while it is read can come out torn; two equal reads in a row cannot be. */
    private static final int READ_ATTEMPTS = 3;

    private final List<MountPoint> mounts;

    private MountTable(List<MountPoint> mounts) {
        this.mounts = List.copyOf(mounts);
    }

    /** Parses mountinfo text; a malformed line is an {@link IllegalArgumentException}. */
    public static MountTable parse(String mountinfo) {
        return new MountTable(mountinfo.lines().filter(line -> !line.isBlank()).map(MountPoint::parse).toList());
    }

    /** Reads the live table of this process's mount namespace. */
    public static MountTable read() throws MountException {
        try {
            String previous = Files.readString(MOUNTINFO);
            for (int attempt = 1; attempt < READ_ATTEMPTS; attempt++) {
                String current = Files.readString(MOUNTINFO);
                if (current.equals(previous)) {
                    break;
                }
                previous = current;
            }
            return parse(previous);
        } catch (IOException | IllegalArgumentException e) {
            throw new MountException("cannot read " + MOUNTINFO + ": " + e.getMessage(), e);
        }
    }

    /** Every mount, in the kernel's order. */
    public List<MountPoint> all() {
        return mounts;
    }

    /**
     * The mount visible at exactly {@code target}: when several are stacked there, the one on top.
     * That is the one no other mount at the path sits on, which in practice is the last listed.
     */
    public Optional<MountPoint> at(Path target) {
        Path path = normalize(target);
        List<MountPoint> here = mounts.stream().filter(m -> m.mountPoint().equals(path)).toList();
        Set<Integer> covered = here.stream().map(MountPoint::parentId).collect(Collectors.toSet());
        return here.reversed().stream().filter(m -> !covered.contains(m.id())).findFirst();
    }

    public boolean isMountPoint(Path target) {
        return at(target).isPresent();
    }

    /** The mounts at {@code dir} or anywhere below it, in the kernel's order: unmount them in reverse. */
    public List<MountPoint> under(Path dir) {
        Path path = normalize(dir);
        return mounts.stream().filter(m -> m.mountPoint().startsWith(path)).toList();
    }

    private static Path normalize(Path path) {
        return path.toAbsolutePath().normalize();
    }
}
