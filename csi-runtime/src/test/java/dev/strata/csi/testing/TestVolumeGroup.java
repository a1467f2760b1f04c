package dev.strata.csi.testing;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Assumptions;

/**
 * An LVM volume group of a test's own, on a loop device over a sparse file, with a thin pool:
 * made for the test and removed after it. Needs a kernel with device-mapper and dm-thin-pool;
 * without, the test is skipped, or fails where STRATA_TEST_LVM=required (hack/lvm-vm.sh sets it,
 * so a VM without device-mapper cannot pass by testing nothing).
 */
public final class TestVolumeGroup implements AutoCloseable {

    /** The test's own commands, without udev as the driver's: the VM has none. */
    public static final String CONFIG = "activation { udev_sync = 0 udev_rules = 0 verify_udev_operations = 0 monitoring = 0 }";
    public static final String THIN_POOL = "thinpool";

    private final String name;
    private final String loop;

    private TestVolumeGroup(String name, String loop) {
        this.name = name;
        this.loop = loop;
    }

    /** Skips the test (or fails it, with STRATA_TEST_LVM=required) on a kernel without device-mapper. */
    public static void requireDeviceMapper() throws Exception {
        // The kernel's driver, not /dev/mapper/control: installing lvm2 makes that node on a kernel without it.
        boolean deviceMapper = Files.readString(Path.of("/proc/misc")).lines().anyMatch(line -> line.endsWith(" device-mapper"));
        if ("required".equals(System.getenv("STRATA_TEST_LVM"))) {
            assertTrue(deviceMapper, "STRATA_TEST_LVM=required, but the kernel has no device-mapper (none in /proc/misc)");
        }
        Assumptions.assumeTrue(deviceMapper, "no device-mapper in this kernel (hack/lvm-vm.sh runs this test in a VM)");
    }

    /** A group named {@code name} on a file of {@code diskSize} in {@code dir}, with a thin pool of {@code thinPoolSize} (lvm's sizes: "1G"). */
    public static TestVolumeGroup make(Path dir, String name, String diskSize, String thinPoolSize) throws Exception {
        return make(dir, name, diskSize, thinPoolSize, (byte) 0);
    }

    /**
     * As {@link #make(Path, String, String, String)}, on a disk whose every byte held {@code old}
     * before the group was made: the old data of a disk's extents, and of the thin pool's chunks,
     * which a new volume must never show.
     */
    public static TestVolumeGroup make(Path dir, String name, String diskSize, String thinPoolSize, byte old) throws Exception {
        requireDeviceMapper();
        Path disk = dir.resolve(name + ".disk");
        Programs.run("truncate", "--size", diskSize, disk.toString());
        if (old != 0) {
            byte[] block = new byte[1 << 20];
            java.util.Arrays.fill(block, old);
            try (var file = java.nio.channels.FileChannel.open(disk, java.nio.file.StandardOpenOption.WRITE)) {
                for (long at = 0; at < file.size(); at += block.length) {
                    file.write(java.nio.ByteBuffer.wrap(block, 0, (int) Math.min(block.length, file.size() - at)), at);
                }
            }
        }
        String loop = Programs.run("losetup", "--find", "--show", disk.toString()).strip();
        TestVolumeGroup group = new TestVolumeGroup(name, loop);
        try {
            Programs.run("vgcreate", "--config", CONFIG, name, loop);
            Programs.run("lvcreate", "--config", CONFIG, "--type", "thin-pool", "--size", thinPoolSize, "--name", THIN_POOL, name);
        } catch (Exception | AssertionError e) {
            group.close();
            throw e;
        }
        return group;
    }

    public String name() {
        return name;
    }

    /** The names of the group's logical volumes that carry the driver's tag. */
    public java.util.List<String> driverVolumes() throws Exception {
        // Every group's volumes with the tag (none: no output), then this group's.
        return Programs.execute("lvs", "--config", CONFIG, "--noheadings", "--separator", "|", "-o", "vg_name,lv_name", "@strata.csi.dev")
                .output().lines().map(String::strip).filter(line -> line.startsWith(name + "|")).map(line -> line.substring(name.length() + 1))
                .sorted().toList();
    }

    /** A logical volume's size in bytes, as lvs reports it. */
    public long sizeBytes(String volume) throws Exception {
        return Long.parseLong(Programs.run("lvs", "--config", CONFIG, "--noheadings", "--nosuffix", "--units", "b", "-o", "lv_size",
                name + "/" + volume).strip());
    }

    /** Whether a logical volume is active (lv_attr's fifth character), as lvs reports it. */
    public boolean active(String volume) throws Exception {
        String attributes = Programs.run("lvs", "--config", CONFIG, "--noheadings", "-o", "lv_attr", name + "/" + volume).strip();
        return attributes.length() > 4 && attributes.charAt(4) == 'a';
    }

    /** Removes the group with every volume in it, and its loop device. */
    @Override
    public void close() throws Exception {
        Programs.execute("vgremove", "--config", CONFIG, "--force", name);
        Programs.execute("pvremove", "--config", CONFIG, loop);
        Programs.execute("losetup", "--detach", loop);
    }
}
