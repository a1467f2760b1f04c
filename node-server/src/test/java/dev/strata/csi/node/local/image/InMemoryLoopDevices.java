package dev.strata.csi.node.local.image;

import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.mount.InMemoryMounter;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;

/**
 * An in-memory stand-in for {@link SystemLoopDevices}, for unit tests without root: loop devices
 * over real image files (in a temporary directory), told apart by their backing file's identity
 * as the kernel does, each holding its file open, so it still reads an image removed under it and
 * reports that file deleted. As the kernel does, attach takes the lowest free number every time,
 * also for an image that already has a device (keeping one device per image is the pool's job);
 * a device keeps the size its file had when attached until {@link #refreshCapacity}; a detach
 * while a mount uses the device (in the {@link InMemoryMounter} it is given) or a process holds it
 * open ({@link #holdOpen}) fails as SystemLoopDevices reports the kernel's deferred detach, and
 * the device goes once nothing uses it (autoclear).
 *
 * <p>Where it differs: no device node is made (its path is where the kernel would make it), and
 * only what {@code InMemoryFilesystems} writes is read through it. {@link #failNext} fails the
 * next call of one kind before it acts.
 */
public final class InMemoryLoopDevices implements LoopDevices {

    static final int LOOP_MAJOR = 7;

    private final InMemoryMounter mounter;
    private final TreeMap<Integer, Attached> devices = new TreeMap<>();
    private final Set<Path> heldOpen = new HashSet<>();
    private final Set<String> failNext = new HashSet<>();
    private final Map<Path, List<DeviceNumber>> holders = new HashMap<>();

    private static final class Attached {
        final Path device;
        final Path file;
        final FileIdentity backing;
        final FileChannel channel;
        final DeviceNumber number;
        long sizeBytes;
        boolean autoclear;

        Attached(Path device, Path file, FileIdentity backing, FileChannel channel, DeviceNumber number, long sizeBytes) {
            this.device = device;
            this.file = file;
            this.backing = backing;
            this.channel = channel;
            this.number = number;
            this.sizeBytes = sizeBytes;
        }
    }

    /** Loop devices whose mounts {@code mounter} keeps: they appear in its /dev while attached. */
    public InMemoryLoopDevices(InMemoryMounter mounter) {
        this.mounter = mounter;
    }

    /** The next call of {@code call} (attach, detach, find, list, size or refresh) fails before it acts. */
    public synchronized void failNext(String call) {
        failNext.add(call);
    }

    /** A process holds {@code device} open (or lets go): it cannot be detached meanwhile. */
    public synchronized void holdOpen(Path device, boolean held) throws DeviceException {
        if (held) {
            heldOpen.add(device);
        } else {
            heldOpen.remove(device);
            clearUnused();
        }
    }

    /** The device's view of its image, for what reads and writes the volume's content ({@code InMemoryFilesystems}). */
    public synchronized FileChannel channel(Path device) throws DeviceException {
        return attached(device).channel;
    }

    @Override
    public synchronized LoopDevice attach(Path image) throws DeviceException {
        String file = image.toAbsolutePath().normalize().toString();
        fail("attach", "cannot attach " + file);
        if (!Files.isRegularFile(image)) {
            throw new DeviceException("cannot attach " + file + ": not a regular file");
        }
        int number = 0;
        while (devices.containsKey(number)) {
            number++;
        }
        try {
            FileChannel channel = FileChannel.open(image, StandardOpenOption.READ, StandardOpenOption.WRITE);
            Attached attached = new Attached(Path.of("/dev/loop" + number), Path.of(file), FileIdentity.of(image), channel,
                    new DeviceNumber(LOOP_MAJOR, number), channel.size());
            devices.put(number, attached);
            mounter.addDevice(attached.device, attached.number);
            return describe(attached);
        } catch (IOException e) {
            throw new DeviceException("cannot attach " + file + ": " + e.getMessage(), e);
        }
    }

    @Override
    public synchronized void detach(Path device) throws DeviceException {
        fail("detach", "detach " + device);
        clearUnused();
        Optional<Attached> found = devices.values().stream().filter(d -> d.device.equals(device)).findFirst();
        if (found.isEmpty()) {
            return;
        }
        if (inUse(found.get())) {
            found.get().autoclear = true;
            throw new DeviceException(device + " is still in use (mounted or held open); the kernel will detach it when it is last closed");
        }
        remove(found.get());
    }

    @Override
    public synchronized Optional<LoopDevice> find(Path image) throws DeviceException {
        fail("find", "cannot stat " + image);
        return LoopDevices.super.find(image);
    }

    /** A device stacked on {@code device}'s (a dm-crypt mapping) from now on, numbered {@code holder}. */
    public synchronized void stack(Path device, DeviceNumber holder) {
        holders.computeIfAbsent(device, d -> new ArrayList<>()).add(holder);
    }

    @Override
    public synchronized List<DeviceNumber> holders(LoopDevice device) {
        return List.copyOf(holders.getOrDefault(device.device(), List.of()));
    }

    @Override
    public synchronized List<LoopDevice> list() throws DeviceException {
        fail("list", "cannot list /sys/block");
        clearUnused();
        List<LoopDevice> all = new ArrayList<>();
        for (Attached attached : devices.values()) {
            all.add(describe(attached));
        }
        return all;
    }

    @Override
    public synchronized long sizeBytes(Path device) throws DeviceException {
        fail("size", "cannot read the size of " + device);
        return attached(device).sizeBytes;
    }

    @Override
    public synchronized void refreshCapacity(Path device) throws DeviceException {
        fail("refresh", "refresh the size of " + device);
        Attached attached = attached(device);
        try {
            attached.sizeBytes = attached.channel.size();
        } catch (IOException e) {
            throw new DeviceException("refresh the size of " + device + ": " + e.getMessage(), e);
        }
    }

    private Attached attached(Path device) throws DeviceException {
        return devices.values().stream().filter(d -> d.device.equals(device)).findFirst()
                .orElseThrow(() -> new DeviceException(device + " is not a loop device"));
    }

    private boolean inUse(Attached attached) throws DeviceException {
        if (heldOpen.contains(attached.device)) {
            return true;
        }
        try {
            LoopDevice device = describe(attached);
            return mounter.table().all().stream().anyMatch(device::backs);
        } catch (MountException e) {
            throw new DeviceException("cannot tell whether " + attached.device + " is in use: " + e.getMessage(), e);
        }
    }

    /** Devices told to detach while in use go once nothing uses them, as the kernel's autoclear does. */
    private void clearUnused() throws DeviceException {
        for (Attached attached : List.copyOf(devices.values())) {
            if (attached.autoclear && !inUse(attached)) {
                remove(attached);
            }
        }
    }

    private void remove(Attached attached) throws DeviceException {
        devices.values().remove(attached);
        mounter.removeDevice(attached.device);
        try {
            attached.channel.close();
        } catch (IOException e) {
            throw new DeviceException("detach " + attached.device + ": " + e.getMessage(), e);
        }
    }

    private static LoopDevice describe(Attached attached) throws DeviceException {
        boolean deleted;
        try {
            deleted = !FileIdentity.ofExisting(attached.file).equals(Optional.of(attached.backing));
        } catch (IOException e) {
            throw new DeviceException("cannot stat " + attached.file + ": " + e.getMessage(), e);
        }
        return new LoopDevice(attached.device, attached.file, attached.backing, deleted, attached.number, true);
    }

    private void fail(String call, String what) throws DeviceException {
        if (failNext.remove(call)) {
            throw new DeviceException(what + ": injected failure of " + call);
        }
    }
}
