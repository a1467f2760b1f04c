package dev.strata.csi.node.local.lvm;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.node.local.BlockDevice;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.pool.LvmPool;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The LVM commands an {@link LvmPool} needs, on one volume group named by the node's admin: the
 * narrow seam between the pool's logic and lvcreate, lvchange, lvremove and lvs. The real one is
 * {@link SystemLogicalVolumes}; tests that run without device-mapper use an in-memory stand-in.
 * Every method acts on the driver's own logical volumes only (those it tagged).
 */
public interface LogicalVolumes {

    /**
     * One logical volume of the group.
     *
     * @param device the device-mapper node (/dev/mapper/vg-lv), present while active
     * @param number the kernel's device number while active, by which mounts are matched
     */
    record LogicalVolume(String name, long sizeBytes, boolean thin, boolean active, Path device, Optional<DeviceNumber> number)
            implements BlockDevice {

        /** Known while active, as an attached volume is. */
        @Override
        public DeviceNumber deviceNumber() {
            return number.orElseThrow(() -> new IllegalStateException("logical volume " + name + " is not active"));
        }

        /**
         * A mount of the device: by its path, its device number, or (a published block volume) a
         * bind mount of its node in /dev, by the node's name there: dm-N (N the minor) where udev
         * made the nodes and links /dev/mapper/<name> to it, or mapper/<name> itself where LVM
         * made the node without udev (a node-server container, the test VM). /dev/<group>/<name>
         * is a link to one of those, so a bind of it has one of those names too.
         */
        @Override
        public boolean backs(MountPoint mount) {
            return mount.source().equals(device.toString())
                    || number.map(mount.device()::equals).orElse(false)
                    || BlockDevice.bindsNode(mount, nodeNames());
        }

        /** The names of the device's node in /dev: dm-N while active, and the device-mapper path. */
        List<String> nodeNames() {
            List<String> names = new ArrayList<>();
            number.ifPresent(n -> names.add("dm-" + n.minor()));
            Path dev = Path.of("/dev");
            if (device.startsWith(dev) && !device.equals(dev)) {
                names.add(dev.relativize(device).toString());
            }
            return names;
        }
    }

    /** The volume group's size and what no logical volume uses yet. */
    record GroupSpace(long sizeBytes, long freeBytes) { }

    /**
     * The thin pool's data size, its metadata size, how full each is, in percent, and whether it
     * zeroes the chunks it gives a thin volume before the volume writes them ({@code lvs -o zero};
     * LVM's default): only then does a new thin volume read as zeros where it was not written.
     * Where not, a chunk partly written shows the rest of its old data: another volume's.
     */
    record ThinPoolSpace(long sizeBytes, double dataPercent, long metadataBytes, double metadataPercent, boolean zeroes) { }

    /** The group's space and its thin pool's, read together. */
    record Space(GroupSpace group, Optional<ThinPoolSpace> thinPool) { }

    /** The volume group's name. */
    String volumeGroup();

    GroupSpace groupSpace() throws DeviceException;

    /** The thin pool thin volumes are made in; empty when the group has none of that name. */
    Optional<ThinPoolSpace> thinPoolSpace() throws DeviceException;

    /** Whether the thin pool zeroes new chunks ({@link ThinPoolSpace#zeroes}); true without a thin pool: none to give old data. */
    default boolean thinPoolZeroes() throws DeviceException {
        return thinPoolSpace().map(ThinPoolSpace::zeroes).orElse(true);
    }

    /** {@link #groupSpace()} and {@link #thinPoolSpace()} at once: the real one reads both with one command. */
    default Space space() throws DeviceException {
        return new Space(groupSpace(), thinPoolSpace());
    }

    /** The driver's logical volumes in the group (tagged as the driver's), active or not. */
    List<LogicalVolume> list() throws DeviceException;

    Optional<LogicalVolume> find(String name) throws DeviceException;

    /** A thin volume of {@code sizeBytes} in the thin pool, made inactive: attach activates it. */
    void createThin(String name, long sizeBytes) throws DeviceException;

    /**
     * A linear volume of {@code sizeBytes} taken from the group's free extents, made inactive. Its
     * extents hold whatever they held before, a deleted volume's data, but for the first 4 KiB
     * (lvcreate --zero): with {@code zeroed}, every byte of it is zeroed before this returns, as
     * {@link #zero} does; without, the caller writes every byte itself (a copy from another node).
     */
    void createLinear(String name, long sizeBytes, boolean zeroed) throws DeviceException;

    /**
     * Writes zeros over the volume from {@code fromBytes} (a multiple of 512) to its end, active or
     * not: blkdiscard --zeroout, which the kernel does with the device's write-zeroes command where
     * it has one (a thin device, a loop file: unmapped, no data written) and by writing zeros where
     * not. An inactive volume is activated for the while.
     */
    void zero(String name, long fromBytes) throws DeviceException;

    /**
     * Discards {@code length} bytes at {@code offset} (multiples of 512) of the active volume
     * {@code name} (blkdiscard): a thin volume unmaps the thin pool's chunks the range covers
     * whole, which then read as zeros and take no space; what it covers of a chunk only may keep
     * its data, so the caller reads the range back where it needs zeros.
     */
    void discard(String name, long offset, long length) throws DeviceException;

    /**
     * A thin snapshot of the thin volume {@code origin}, named {@code name}, made inactive: instant,
     * sharing the origin's blocks until either is written, independent of the origin's later
     * writes and of its removal. LVM suspends the origin for the moment it takes, which freezes a
     * filesystem mounted on it: the snapshot is consistent.
     */
    void snapshot(String origin, String name) throws DeviceException;

    /**
     * The thin device id of the thin volume or snapshot {@code name} in the thin pool's metadata
     * ({@code lvs -o thin_id}): what {@link ThinMappings} takes.
     */
    long thinId(String name) throws DeviceException;

    /** Grows the volume to at least {@code sizeBytes}, active or not, in use or not; a thin one's virtual size. */
    void extend(String name, long sizeBytes) throws DeviceException;

    /**
     * The devices stacked on the active volume's device, by number (its holders in sysfs): the
     * dm-crypt mapping of an encrypted volume, on which its filesystem is mounted.
     */
    List<DeviceNumber> holders(LogicalVolume volume) throws DeviceException;

    /** Activates the volume on this node: its device-mapper device appears. Returns the volume, active. */
    LogicalVolume activate(String name) throws DeviceException;

    /** Deactivates the volume: its device-mapper device goes. The kernel refuses while it is open. */
    void deactivate(String name) throws DeviceException;

    /** Removes the volume, which must be inactive; its data is gone. */
    void remove(String name) throws DeviceException;
}
