package dev.strata.csi.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * What the system says, asked of util-linux's own tools rather than of the driver's code, so a
 * test checks the driver's effect independently of how the driver reads it.
 */
public final class SystemState {

    private SystemState() {}

    /**
     * Whether this process holds CAP_SYS_RESOURCE (bit 24 of CapEff), which ext4's online resize
     * ioctl needs: some sandboxes withhold it from root; node-server's privileged container has it.
     * With STRATA_TEST_CAP_SYS_RESOURCE=required (hack/expansion-vm.sh sets it) its absence fails
     * the test, so a run meant to grow ext4 online cannot pass on the sandbox's branch instead.
     */
    public static boolean hasCapSysResource() throws IOException {
        String effective = Files.readAllLines(Path.of("/proc/self/status")).stream().filter(line -> line.startsWith("CapEff:"))
                .findFirst().orElseThrow().substring("CapEff:".length()).strip();
        boolean held = (Long.parseUnsignedLong(effective, 16) & (1L << 24)) != 0;
        if (!held && "required".equals(System.getenv("STRATA_TEST_CAP_SYS_RESOURCE"))) {
            throw new IllegalStateException("STRATA_TEST_CAP_SYS_RESOURCE=required, but this process lacks CAP_SYS_RESOURCE (CapEff "
                    + effective + ")");
        }
        return held;
    }

    /** The loop devices backed by {@code image} (losetup --associated). */
    public static List<String> loopDevicesOf(Path image) throws Exception {
        String out = run("losetup", "--noheadings", "--output", "NAME", "--associated", image.toString());
        return out.lines().map(String::strip).filter(line -> !line.isEmpty()).toList();
    }

    /**
     * The loop devices whose backing file is {@code image}, by its device and inode numbers as
     * losetup reports them: found whichever mount namespace attached them, where the path losetup
     * shows is that namespace's.
     */
    public static List<String> loopDevicesHolding(Path image) throws Exception {
        if (!Files.exists(image)) {
            return List.of();
        }
        String[] stat = Programs.run("stat", "--format", "%Hd:%Ld %i", image.toString()).strip().split(" ");
        return Programs.run("losetup", "--list", "--noheadings", "--raw", "--output", "NAME,BACK-MAJ:MIN,BACK-INO")
                .lines().map(line -> line.replace("\\x20", "").strip().split(" ")) // raw output escapes the padding
                .filter(fields -> fields.length == 3 && fields[1].equals(stat[0]) && fields[2].equals(stat[1]))
                .map(fields -> fields[0]).toList();
    }

    /** Loop devices whose backing file, deleted or not, in whichever namespace, is named {@code fileName}. */
    public static List<String> loopDevicesOfFileNamed(String fileName) throws Exception {
        return Programs.run("losetup", "--list", "--noheadings", "--raw", "--output", "NAME,BACK-FILE")
                .lines().filter(line -> line.contains("/" + fileName)).toList();
    }

    /** SOURCE FSTYPE OPTIONS of the topmost mount at {@code path}, if any (findmnt). */
    public static Optional<Mount> mountAt(Path path) throws Exception {
        String out = run("findmnt", "--noheadings", "--raw", "--output", "SOURCE,FSTYPE,OPTIONS", "--mountpoint", path.toString());
        List<String> lines = out.lines().filter(line -> !line.isBlank()).toList();
        if (lines.isEmpty()) {
            return Optional.empty();
        }
        String[] fields = lines.getLast().split(" ");
        return Optional.of(new Mount(fields[0], fields[1], List.of(fields[2].split(","))));
    }

    public record Mount(String source, String fsType, List<String> options) {
        public boolean readOnly() {
            return options.contains("ro");
        }
    }

    /** Mount points at or below {@code dir}, deepest first. */
    public static List<Path> mountsUnder(Path dir) throws IOException {
        List<Path> found = new ArrayList<>();
        for (String line : Files.readAllLines(Path.of("/proc/self/mountinfo"), StandardCharsets.UTF_8)) {
            String mountPoint = line.split(" ")[4].replace("\\040", " ");
            if (mountPoint.equals(dir.toString()) || mountPoint.startsWith(dir + "/")) {
                found.add(Path.of(mountPoint));
            }
        }
        found.sort((a, b) -> b.getNameCount() - a.getNameCount());
        return found;
    }

    /**
     * Undoes whatever a test left below {@code dir}: lazy unmounts, deepest first, then detaches
     * loop devices backed by files there. Returns what it had to clean, so a test can assert it was
     * nothing. Done with util-linux, not with the driver's own mount and loop code.
     */
    public static List<String> cleanUp(Path dir) throws Exception {
        if (!Files.exists(dir)) {
            return List.of(); // a suite skipped before it made anything
        }
        dir = dir.toRealPath(); // mountinfo and losetup name resolved paths
        List<String> leftovers = new ArrayList<>();
        // Loop devices first: an image may sit on a mount below dir, and once that is lazily
        // unmounted the device names its image by a path outside dir. A device still mounted is
        // detached by the kernel when its last mount goes.
        String all = run("losetup", "--noheadings", "--raw", "--output", "NAME,BACK-FILE");
        for (String line : all.lines().toList()) {
            String[] fields = line.strip().split(" ", 2);
            if (fields.length == 2 && fields[1].startsWith(dir.toString())) {
                leftovers.add("loop " + line.strip());
                run("losetup", "--detach", fields[0]);
            }
        }
        for (Path mount : mountsUnder(dir)) {
            leftovers.add("mount " + mount);
            run("umount", "--lazy", mount.toString());
        }
        return leftovers;
    }

    /** The output of {@code command}, whatever its exit status. */
    public static String run(String... command) throws Exception {
        return Programs.execute(command).output();
    }
}
