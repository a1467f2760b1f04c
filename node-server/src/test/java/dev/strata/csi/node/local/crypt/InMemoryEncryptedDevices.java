package dev.strata.csi.node.local.crypt;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * An in-memory stand-in for {@link SystemEncryptedDevices}, for unit tests of the logic above it:
 * devices hold a header with one passphrase, mappings are a map. It answers as cryptsetup does
 * where the logic can tell: a wrong passphrase is {@link WrongPassphraseException}, opening a device
 * without a header or a name in use fails, closing what is not open does nothing. Unlike the real
 * tools it keeps the passphrase it was given (to compare), and sizes are fixed (1 GiB less the
 * 16 MiB header). Each call is counted in {@link #calls}.
 */
public final class InMemoryEncryptedDevices implements EncryptedDevices {

    private static final long SIZE = (1L << 30) - (16L << 20);

    /** Device -> the passphrase its header opens with. */
    final Map<Path, String> headers = new HashMap<>();
    final Map<String, MappedDevice> open = new HashMap<>();
    final List<String> calls = new ArrayList<>();
    private int minor;

    @Override
    public void format(Path device, Passphrase passphrase) {
        calls.add("format " + device);
        headers.put(device, new String(passphrase.bytes()));
    }

    @Override
    public MappedDevice open(Path device, String name, Passphrase passphrase) throws DeviceException {
        calls.add("open " + device + " " + name);
        String key = headers.get(device);
        if (key == null) {
            throw new DeviceException("cryptsetup open " + device + " " + name + ": exit 1: Device " + device + " is not a valid LUKS device.");
        }
        if (open.containsKey(name)) {
            throw new DeviceException("cryptsetup open " + device + " " + name + ": exit 5: Device " + name + " already exists.");
        }
        if (!key.equals(new String(passphrase.bytes()))) {
            throw new WrongPassphraseException("the passphrase opens no key slot of " + device);
        }
        MappedDevice mapped = new MappedDevice(name, Path.of("/dev/dm-" + minor), new DeviceNumber(254, minor++), device, SIZE);
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
        if (!headers.get(mapped.backing()).equals(new String(passphrase.bytes()))) {
            throw new WrongPassphraseException("the passphrase opens no key slot of the device under " + name);
        }
    }

    @Override
    public Optional<MappedDevice> find(String name) {
        return Optional.ofNullable(open.get(name));
    }
}
