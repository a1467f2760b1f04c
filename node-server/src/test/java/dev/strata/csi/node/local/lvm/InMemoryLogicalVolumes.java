package dev.strata.csi.node.local.lvm;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * An in-memory stand-in for {@link SystemLogicalVolumes}, for the LVM pool's tests on machines
 * without device-mapper (this one): a volume group of a given size with one thin pool, whose
 * volumes exist, are active or not, and take space as the lvm2 tools say (sizes rounded up to
 * 4 MiB extents; a thin volume takes no data until written, which {@link #write} stands for).
 * Errors carry the tool's command line as {@link dev.strata.csi.system.CommandResult#check} puts
 * it, with a message close to lvm2's (the pool only passes them on, never parses them). Where it
 * differs: no devices are made (a volume's device path is where LVM would make it, and nothing is
 * there; its device number is made up), unless {@link #devicesIn} names a directory, where each
 * volume's data is a regular file (LVM's device at its name, whether active or not: reading an
 * inactive one is the test's to avoid); and nothing is ever open, as only the kernel knows.
 * A data file reads as the volume would: a thin volume in a pool that zeroes new chunks reads
 * zeros where not written; a linear one, and (stricter than LVM, whose unprovisioned blocks still
 * read as zeros) a thin one in a pool that does not zero, reads {@link #OLD_DATA} everywhere it
 * was not written, standing for the old data of the disk's extents. {@link #failNext} makes the next call of one command
 * fail before it acts: a node that died before that step, as the crash points stand for.
 */
public final class InMemoryLogicalVolumes implements LogicalVolumes {

    static final long EXTENT = 4L << 20;
    /** What a volume's extents hold before it writes them, where LVM does not zero them. */
    public static final byte OLD_DATA = 0x5a;

    private final String group;
    private final long groupBytes;
    private final String thinPool;
    private final long thinPoolBytes;
    private final long metadataBytes;
    private final Map<String, State> volumes = new LinkedHashMap<>();
    private final Map<String, Long> thinIds = new HashMap<>();
    private long thinDataBytes;
    private double metadataPercent;
    private int nextMinor;
    private String failNext = "";
    private boolean zeroes = true;
    private final List<Long> zeroedFrom = new ArrayList<>();
    private final Map<String, List<DeviceNumber>> holders = new HashMap<>();
    /** Where volumes keep their data; null: nowhere. */
    private Path devices;

    /** Data blocks of the thin pool and how many thin volumes share them; freed with the last. */
    private static final class Blocks {
        long bytes;
        int users = 1;
    }

    private static final class State {
        long sizeBytes;
        final boolean thin;
        boolean active;
        int minor = -1;
        /** A thin volume's data in the thin pool, shared with its thin snapshots (and theirs). */
        Blocks blocks = new Blocks();

        State(long sizeBytes, boolean thin) {
            this.sizeBytes = sizeBytes;
            this.thin = thin;
        }
    }

    /** A group of {@code groupBytes} holding a thin pool of {@code thinPoolBytes} (its metadata volume takes 4 MiB more). */
    public InMemoryLogicalVolumes(String group, long groupBytes, String thinPool, long thinPoolBytes) {
        this.group = group;
        this.groupBytes = groupBytes;
        this.thinPool = thinPool;
        this.thinPoolBytes = thinPoolBytes;
        this.metadataBytes = EXTENT;
    }

    /** The next call of {@code command} (lvcreate, lvcreate-snapshot, lvextend, lvchange-activate, lvchange-deactivate, lvremove, blkdiscard) fails before it acts. */
    public synchronized void failNext(String command) {
        failNext = command;
    }

    /** Volumes keep their data in files in {@code dir} from now on: their device paths. */
    public synchronized InMemoryLogicalVolumes devicesIn(Path dir) {
        devices = dir;
        return this;
    }

    /** Whether the thin pool zeroes new chunks (lvchange --zero y|n; LVM's default: y). */
    public synchronized void zeroing(boolean zeroing) {
        zeroes = zeroing;
    }

    /** A thin volume's data written: taken from the thin pool. */
    public synchronized void write(String name, long bytes) {
        State state = volumes.get(name);
        long more = Math.min(bytes, state.sizeBytes - state.blocks.bytes);
        state.blocks.bytes += more;
        if (state.thin) {
            thinDataBytes += more;
        }
    }

    public synchronized void metadataPercent(double percent) {
        metadataPercent = percent;
    }

    /** The admin's own volume in the group, untagged: the driver must never list or touch it. */
    public synchronized void addForeign(String name, long sizeBytes) {
        volumes.put("foreign:" + name, new State(extents(sizeBytes), false));
    }

    /** A volume tagged as the driver's that no record names (made by hand, or by a lost node's agent). */
    public synchronized void addTagged(String name, long sizeBytes) {
        volumes.put(name, new State(extents(sizeBytes), true));
    }

    @Override
    public String volumeGroup() {
        return group;
    }

    @Override
    public synchronized GroupSpace groupSpace() {
        long used = thinPoolBytes + metadataBytes;
        for (State state : volumes.values()) {
            used += state.thin ? 0 : state.sizeBytes;
        }
        return new GroupSpace(groupBytes, groupBytes - used);
    }

    @Override
    public synchronized Optional<ThinPoolSpace> thinPoolSpace() {
        return Optional.of(new ThinPoolSpace(thinPoolBytes, 100.0 * thinDataBytes / thinPoolBytes, metadataBytes, metadataPercent, zeroes));
    }

    @Override
    public synchronized List<LogicalVolume> list() {
        List<LogicalVolume> listed = new ArrayList<>();
        volumes.forEach((name, state) -> {
            if (!name.startsWith("foreign:")) {
                listed.add(volume(name, state));
            }
        });
        return listed;
    }

    @Override
    public synchronized Optional<LogicalVolume> find(String name) {
        return Optional.ofNullable(volumes.get(name)).map(state -> volume(name, state));
    }

    @Override
    public synchronized void createThin(String name, long sizeBytes) throws DeviceException {
        String command = "lvcreate --thin --virtualsize " + sizeBytes + "b --name " + name + " " + group + "/" + thinPool;
        injected("lvcreate", command);
        requireNew(name, command);
        volumes.put(name, new State(extents(sizeBytes), true));
        made(name, extents(sizeBytes), !zeroes);
    }

    @Override
    public synchronized void createLinear(String name, long sizeBytes, boolean zeroed) throws DeviceException {
        String command = "lvcreate --size " + sizeBytes + "b --name " + name + " " + group;
        injected("lvcreate", command);
        requireNew(name, command);
        if (extents(sizeBytes) > groupSpace().freeBytes()) {
            throw new DeviceException(command + ": exit 5: Volume group \"" + group + "\" has insufficient free space ("
                    + groupSpace().freeBytes() / EXTENT + " extents): " + extents(sizeBytes) / EXTENT + " required.");
        }
        volumes.put(name, new State(extents(sizeBytes), false));
        made(name, extents(sizeBytes), true);
        if (zeroed) {
            injected("blkdiscard", "blkdiscard --zeroout " + device(name)); // made, not yet zeroed: the node died meanwhile
            fill(name, 0, (byte) 0);
        }
    }

    @Override
    public synchronized void zero(String name, long fromBytes) throws DeviceException {
        String command = "blkdiscard --zeroout --offset " + fromBytes + " " + device(name);
        existing(name, command);
        injected("blkdiscard", command);
        if (fromBytes % 512 != 0) {
            throw new DeviceException(command + ": exit 1: offset " + fromBytes + " is not aligned to sector size 512");
        }
        fill(name, fromBytes, (byte) 0);
        zeroedFrom.add(fromBytes);
    }

    /**
     * The thin pool's chunks ({@link InMemoryThinMappings#CHUNK}) the range covers whole read zeros
     * once discarded, as dm-thin unmaps them; what it covers of a chunk only keeps its data.
     */
    @Override
    public synchronized void discard(String name, long offset, long length) throws DeviceException {
        String command = "blkdiscard --offset " + offset + " --length " + length + " " + device(name);
        existing(name, command);
        injected("blkdiscard", command);
        long chunk = InMemoryThinMappings.CHUNK;
        long from = Math.ceilDiv(offset, chunk) * chunk;
        long to = Math.floorDiv(offset + length, chunk) * chunk;
        if (devices == null || to <= from) {
            return;
        }
        try (FileChannel file = FileChannel.open(device(name), StandardOpenOption.WRITE)) {
            file.write(ByteBuffer.allocate((int) (to - from)), from);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Where {@link #zero} was asked to zero from, in order: what a test checks of the pool's zeroing. */
    public synchronized List<Long> zeroedFrom() {
        return List.copyOf(zeroedFrom);
    }

    /** The volume's data file from {@code fromBytes} to its end filled with {@code value}, when volumes keep data. */
    private void fill(String name, long fromBytes, byte value) {
        if (devices == null) {
            return;
        }
        try (FileChannel file = FileChannel.open(device(name), StandardOpenOption.WRITE)) {
            byte[] block = new byte[1 << 20];
            Arrays.fill(block, value);
            long size = volumes.get(name).sizeBytes;
            for (long at = fromBytes; at < size; at += block.length) {
                file.write(ByteBuffer.wrap(block, 0, (int) Math.min(block.length, size - at)), at);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** A new volume's data file, when volumes keep data: its old data where LVM does not zero. */
    private void made(String name, long sizeBytes, boolean oldData) {
        if (devices == null) {
            return;
        }
        try (FileChannel file = FileChannel.open(device(name), StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            ensureSize(file, sizeBytes);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        if (oldData) {
            fill(name, 0, OLD_DATA);
        }
    }

    private static void ensureSize(FileChannel file, long sizeBytes) throws IOException {
        if (file.size() < sizeBytes) {
            file.write(ByteBuffer.allocate(1), sizeBytes - 1);
        }
    }

    @Override
    public synchronized void snapshot(String origin, String name) throws DeviceException {
        String command = "lvcreate --snapshot --name " + name + " " + group + "/" + origin;
        injected("lvcreate-snapshot", command);
        State source = existing(origin, command);
        if (!source.thin) {
            // lvcreate would ask for a size and make an old-style snapshot; the pool never asks for one.
            throw new DeviceException(command + ": exit 3: Please specify either size or extents with snapshots.");
        }
        requireNew(name, command);
        State copy = new State(source.sizeBytes, true);
        copy.blocks = source.blocks; // shared with the origin: no new data in the thin pool
        source.blocks.users++;
        volumes.put(name, copy);
        if (devices != null) {
            try {
                Files.copy(device(origin), device(name));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }

    /** Thin device ids as the thin pool hands them out: one more for each thin volume and snapshot, by name here. */
    @Override
    public synchronized long thinId(String name) throws DeviceException {
        State state = existing(name, "lvs -o thin_id " + group + "/" + name);
        if (!state.thin) {
            throw new DeviceException("logical volume " + group + "/" + name + " has no thin device id (lvs says \"\")");
        }
        return thinIds.computeIfAbsent(name, n -> (long) thinIds.size() + 1);
    }

    @Override
    public synchronized void extend(String name, long sizeBytes) throws DeviceException {
        String command = "lvextend --size " + sizeBytes + "b " + group + "/" + name;
        injected("lvextend", command);
        State state = existing(name, command);
        long size = extents(sizeBytes);
        if (size <= state.sizeBytes) {
            throw new DeviceException(command + ": exit 5: New size given (" + size / EXTENT + " extents) not larger than existing size ("
                    + state.sizeBytes / EXTENT + " extents)");
        }
        if (!state.thin && size - state.sizeBytes > groupSpace().freeBytes()) {
            throw new DeviceException(command + ": exit 5: Insufficient free space: " + (size - state.sizeBytes) / EXTENT
                    + " extents needed, but only " + groupSpace().freeBytes() / EXTENT + " available");
        }
        long before = state.sizeBytes;
        state.sizeBytes = size;
        if (devices != null) {
            try (FileChannel file = FileChannel.open(device(name), StandardOpenOption.WRITE)) {
                ensureSize(file, size); // grown: a thin volume's new blocks are unwritten
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            if (!state.thin) {
                fill(name, before, OLD_DATA); // a linear one's new extents hold old data
            }
        }
    }

    /** A device stacked on the volume's (a dm-crypt mapping) from now on, numbered {@code holder}. */
    public synchronized void stack(String name, DeviceNumber holder) {
        holders.computeIfAbsent(name, n -> new ArrayList<>()).add(holder);
    }

    @Override
    public synchronized List<DeviceNumber> holders(LogicalVolume volume) {
        return List.copyOf(holders.getOrDefault(volume.name(), List.of()));
    }

    @Override
    public synchronized LogicalVolume activate(String name) throws DeviceException {
        String command = "lvchange --activate y " + group + "/" + name;
        injected("lvchange-activate", command);
        State state = existing(name, command);
        if (!state.active) {
            state.active = true;
            state.minor = nextMinor++;
        }
        return volume(name, state);
    }

    @Override
    public synchronized void deactivate(String name) throws DeviceException {
        String command = "lvchange --activate n " + group + "/" + name;
        injected("lvchange-deactivate", command);
        State state = existing(name, command);
        state.active = false;
        state.minor = -1;
    }

    @Override
    public synchronized void remove(String name) throws DeviceException {
        String command = "lvremove --yes " + group + "/" + name;
        injected("lvremove", command);
        State state = existing(name, command);
        volumes.remove(name);
        if (devices != null) {
            try {
                Files.deleteIfExists(device(name));
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        if (state.thin && --state.blocks.users == 0) {
            thinDataBytes -= state.blocks.bytes; // blocks shared with a snapshot stay until the last user goes
        } // lvremove --yes deactivates an active volume that nothing holds open
    }

    /** Where LVM makes the volume's device, or its data file. */
    private Path device(String name) {
        String mapperName = group.replace("-", "--") + "-" + name.replace("-", "--");
        return devices == null ? Path.of("/dev/mapper/" + mapperName) : devices.resolve(mapperName);
    }

    private LogicalVolume volume(String name, State state) {
        Path device = device(name);
        // Major 253 is the device-mapper's on most kernels; the minors are made up.
        Optional<DeviceNumber> number = state.active ? Optional.of(new DeviceNumber(253, 1000 + state.minor)) : Optional.empty();
        return new LogicalVolume(name, state.sizeBytes, state.thin, state.active, device, number);
    }

    /**
     * A name lvm2 takes for a new volume: not beginning with "snapshot" or "pvmove", none of the
     * parts it keeps for hidden volumes, and a device-mapper name ({@code <group>-<name>}, dashes
     * doubled) of at most 127 characters, which the kernel enforces at activation (lvm2 then
     * fails there; here at once).
     */
    private void requireNew(String name, String command) throws DeviceException {
        if (name.startsWith("snapshot") || name.startsWith("pvmove")
                || List.of("_cdata", "_cmeta", "_corig", "_mimage", "_mlog", "_pmspare", "_rimage", "_rmeta", "_tdata", "_tmeta",
                        "_vorigin").stream().anyMatch(name::contains)) {
            throw new DeviceException(command + ": exit 3: Logical volume name \"" + name + "\" is invalid.");
        }
        String dmName = group.replace("-", "--") + "-" + name.replace("-", "--");
        if (dmName.length() > 127) {
            throw new DeviceException(command + ": exit 5: device-mapper: create ioctl on " + dmName + " failed: Invalid argument");
        }
        if (volumes.containsKey(name)) {
            throw new DeviceException(command + ": exit 5: Logical Volume \"" + name + "\" already exists in volume group \"" + group + "\"");
        }
    }

    private State existing(String name, String command) throws DeviceException {
        State state = volumes.get(name);
        if (state == null) {
            throw new DeviceException(command + ": exit 5: Failed to find logical volume \"" + group + "/" + name + "\"");
        }
        return state;
    }

    private void injected(String step, String command) throws DeviceException {
        if (failNext.equals(step)) {
            failNext = "";
            throw new DeviceException(command + ": injected failure before the step (the node died here)");
        }
    }

    private static long extents(long bytes) {
        return Math.ceilDiv(bytes, EXTENT) * EXTENT;
    }
}
