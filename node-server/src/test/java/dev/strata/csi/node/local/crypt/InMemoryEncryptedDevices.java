package dev.strata.csi.node.local.crypt;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;

/**
 * An in-memory stand-in for {@link SystemEncryptedDevices}, for unit tests of the logic above it:
 * a device's header is LUKS2's 32 key slots, each empty or holding a passphrase, mappings are a map.
 * It answers as cryptsetup does where the logic can tell: a passphrase that opens no slot is
 * {@link WrongPassphraseException}; luksAddKey takes the first free slot (none free: an error);
 * luksKillSlot wants a passphrase of another slot, and an active slot; opening a device without a
 * header or a name in use fails, closing what is not open does nothing. Unlike the real tools it
 * keeps the passphrases it was given (to compare), and sizes are fixed (1 GiB less the 16 MiB
 * header). Each call is counted in {@link #calls}; {@link #failKillSlot} makes luksKillSlot fail
 * (as a node-server killed between the add and the removal leaves the header).
 */
public final class InMemoryEncryptedDevices implements EncryptedDevices {

    static final int KEY_SLOTS = 32;
    private static final long SIZE = (1L << 30) - (16L << 20);

    /** Device -> its key slots: the passphrase each opens with, null when empty. */
    final Map<Path, String[]> headers = new HashMap<>();
    final Map<String, MappedDevice> open = new HashMap<>();
    final List<String> calls = new ArrayList<>();
    boolean failKillSlot;
    private int minor;

    @Override
    public void format(Path device, Passphrase passphrase) {
        calls.add("format " + device);
        String[] slots = new String[KEY_SLOTS];
        slots[0] = text(passphrase);
        headers.put(device, slots);
    }

    @Override
    public MappedDevice open(Path device, String name, Passphrase passphrase) throws DeviceException {
        calls.add("open " + device + " " + name);
        String[] slots = headers.get(device);
        if (slots == null) {
            throw new DeviceException("cryptsetup open " + device + " " + name + ": exit 1: Device " + device + " is not a valid LUKS device.");
        }
        if (open.containsKey(name)) {
            throw new DeviceException("cryptsetup open " + device + " " + name + ": exit 5: Device " + name + " already exists.");
        }
        if (slot(slots, text(passphrase), -1).isEmpty()) {
            throw new WrongPassphraseException("the passphrase opens no key slot of " + device);
        }
        // The backing device's number is not known here: the logic matches a mapping with its device by path then.
        MappedDevice mapped = new MappedDevice(name, Path.of("/dev/dm-" + minor), new DeviceNumber(254, minor++), device,
                new DeviceNumber(0, 0), SIZE);
        open.put(name, mapped);
        return mapped;
    }

    @Override
    public void close(String name) {
        calls.add("close " + name);
        open.remove(name);
    }

    @Override
    public void resize(String name, Passphrase passphrase) throws DeviceException {
        calls.add("resize " + name);
        MappedDevice mapped = open.get(name);
        if (mapped == null) {
            throw new DeviceException("cryptsetup resize " + name + ": exit 4: Device " + name + " not found");
        }
        if (slot(headers.get(mapped.backing()), text(passphrase), -1).isEmpty()) {
            throw new WrongPassphraseException("the passphrase opens no key slot of the device under " + name);
        }
    }

    @Override
    public OptionalInt slotOf(Path device, Passphrase passphrase) throws DeviceException {
        calls.add("test " + device);
        return slot(header(device), text(passphrase), -1);
    }

    @Override
    public void addKey(Path device, Passphrase existing, Passphrase added) throws DeviceException {
        calls.add("addKey " + device);
        String[] slots = header(device);
        if (slot(slots, text(existing), -1).isEmpty()) {
            throw new WrongPassphraseException("the existing passphrase opens no key slot of " + device);
        }
        for (int i = 0; i < KEY_SLOTS; i++) {
            if (slots[i] == null) {
                slots[i] = text(added);
                return;
            }
        }
        throw new DeviceException("cryptsetup luksAddKey " + device + ": exit 1: All key slots full.");
    }

    @Override
    public void killSlot(Path device, int slot, Passphrase remaining) throws DeviceException {
        calls.add("killSlot " + device + " " + slot);
        if (failKillSlot) {
            throw new DeviceException("cryptsetup luksKillSlot " + device + " " + slot + ": killed");
        }
        String[] slots = header(device);
        if (slots[slot] == null) {
            throw new DeviceException("cryptsetup luksKillSlot " + device + " " + slot + ": exit 1: Keyslot " + slot + " is not active.");
        }
        if (slot(slots, text(remaining), slot).isEmpty()) {
            throw new WrongPassphraseException("the passphrase to keep opens no key slot of " + device + " but " + slot);
        }
        slots[slot] = null;
    }

    @Override
    public Optional<MappedDevice> find(String name) {
        return Optional.ofNullable(open.get(name));
    }

    /** The passphrases the device's header opens with, slot by slot (null: empty). */
    List<String> slots(Path device) {
        return java.util.Arrays.asList(headers.get(device).clone());
    }

    private String[] header(Path device) throws DeviceException {
        String[] slots = headers.get(device);
        if (slots == null) {
            throw new DeviceException("cryptsetup: Device " + device + " is not a valid LUKS device.");
        }
        return slots;
    }

    /** The first slot but {@code except} that opens with {@code passphrase}. */
    private static OptionalInt slot(String[] slots, String passphrase, int except) {
        for (int i = 0; i < KEY_SLOTS; i++) {
            if (i != except && passphrase.equals(slots[i])) {
                return OptionalInt.of(i);
            }
        }
        return OptionalInt.empty();
    }

    private static String text(Passphrase passphrase) {
        return new String(passphrase.bytes(), java.nio.charset.StandardCharsets.UTF_8);
    }
}
