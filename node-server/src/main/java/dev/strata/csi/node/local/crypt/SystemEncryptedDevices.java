package dev.strata.csi.node.local.crypt;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.system.Commands;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * {@link EncryptedDevices} with cryptsetup (Debian's cryptsetup-bin), the passphrase on its
 * standard input ({@code --key-file=-}: read to its end, as it is, no newline stripped), and
 * sysfs for what is open: device-mapper names each mapping in {@code /sys/block/dm-N/dm/name},
 * which survives a restart of node-server and needs no udev.
 */
public final class SystemEncryptedDevices implements EncryptedDevices {

    private static final long SECTOR_BYTES = 512;
    /** Key derivation is made slow on purpose (about 2 s); under load or emulation more. */
    private static final Duration TIMEOUT = Duration.ofMinutes(3);
    /** cryptsetup's exit status for a passphrase that opens no key slot. */
    private static final int NO_PERMISSION = 2;
    /** What {@code cryptsetup --verbose open --test-passphrase} prints on its standard output. */
    private static final Pattern UNLOCKED = Pattern.compile("Key slot (\\d+) unlocked");
    /** The key derivation of every key slot, as {@link #format} explains. */
    private static final String PBKDF_MEMORY_KIB = "65536";

    private final Commands commands;
    private final Path sysBlock;

    public SystemEncryptedDevices(Commands commands) {
        this(commands, Path.of("/sys/block"));
    }

    SystemEncryptedDevices(Commands commands, Path sysBlock) {
        this.commands = commands;
        this.sysBlock = sysBlock;
    }

    /**
     * argon2id with 64 MiB rather than cryptsetup's default of up to 1 GiB: a node that stages many
     * volumes at once after a reboot must not need a GiB for each. The key in a Secret should be
     * random (docs/attributes.md), where key stretching adds little.
     */
    @Override
    public void format(Path device, Passphrase passphrase) throws DeviceException {
        String path = absolute(device);
        DeviceException.check(run(passphrase.bytes(), "cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2", "--pbkdf", "argon2id",
                "--pbkdf-memory", PBKDF_MEMORY_KIB, "--key-file=-", path), "cryptsetup luksFormat " + path);
    }

    @Override
    public MappedDevice open(Path device, String name, Passphrase passphrase) throws DeviceException {
        String path = absolute(device);
        CommandResult result = run(passphrase.bytes(), "cryptsetup", "open", "--type", "luks2", "--key-file=-", path, name);
        if (result.exitCode() == NO_PERMISSION) {
            throw new WrongPassphraseException("the passphrase opens no key slot of " + path);
        }
        DeviceException.check(result, "cryptsetup open " + path + " " + name);
        return find(name).orElseThrow(() -> new DeviceException("cryptsetup opened " + name + " but sysfs shows no such mapping"));
    }

    @Override
    public void close(String name) throws DeviceException {
        if (find(name).isEmpty()) {
            return;
        }
        try {
            DeviceException.check(commands.run(TIMEOUT, "cryptsetup", "close", name), "cryptsetup close " + name);
        } catch (CommandException e) {
            throw new DeviceException(e.getMessage(), e);
        }
    }

    @Override
    public void resize(String name, Passphrase passphrase) throws DeviceException {
        CommandResult result = run(passphrase.bytes(), "cryptsetup", "resize", "--key-file=-", name);
        if (result.exitCode() == NO_PERMISSION) {
            throw new WrongPassphraseException("the passphrase opens no key slot of the device under " + name);
        }
        DeviceException.check(result, "cryptsetup resize " + name);
    }

    @Override
    public OptionalInt slotOf(Path device, Passphrase passphrase) throws DeviceException {
        String path = absolute(device);
        CommandResult result = run(passphrase.bytes(), "cryptsetup", "--verbose", "open", "--test-passphrase", "--type", "luks2",
                "--key-file=-", path);
        if (result.exitCode() == NO_PERMISSION) {
            return OptionalInt.empty();
        }
        DeviceException.check(result, "cryptsetup open --test-passphrase " + path);
        Matcher slot = UNLOCKED.matcher(result.stdout());
        if (!slot.find()) {
            throw new DeviceException("cryptsetup open --test-passphrase " + path + " named no key slot: " + result.stdout().strip());
        }
        return OptionalInt.of(Integer.parseInt(slot.group(1)));
    }

    /** Both passphrases on standard input, one after the other, each read by its length: neither reaches an argument or a file. */
    @Override
    public void addKey(Path device, Passphrase existing, Passphrase added) throws DeviceException {
        String path = absolute(device);
        byte[] input = new byte[existing.length() + added.length()];
        System.arraycopy(existing.bytes(), 0, input, 0, existing.length());
        System.arraycopy(added.bytes(), 0, input, existing.length(), added.length());
        CommandResult result = run(input, "cryptsetup", "luksAddKey", "--batch-mode", "--pbkdf", "argon2id", "--pbkdf-memory", PBKDF_MEMORY_KIB,
                "--key-file=-", "--keyfile-size=" + existing.length(), "--new-keyfile-size=" + added.length(), path, "-");
        if (result.exitCode() == NO_PERMISSION) {
            throw new WrongPassphraseException("the existing passphrase opens no key slot of " + path);
        }
        DeviceException.check(result, "cryptsetup luksAddKey " + path);
    }

    @Override
    public void killSlot(Path device, int slot, Passphrase remaining) throws DeviceException {
        String path = absolute(device);
        CommandResult result = run(remaining.bytes(), "cryptsetup", "luksKillSlot", "--batch-mode", "--key-file=-", path,
                Integer.toString(slot));
        if (result.exitCode() == NO_PERMISSION) {
            throw new WrongPassphraseException("the passphrase to keep opens no key slot of " + path + " but " + slot);
        }
        DeviceException.check(result, "cryptsetup luksKillSlot " + path + " " + slot);
    }

    @Override
    public Optional<MappedDevice> find(String name) throws DeviceException {
        try (Stream<Path> devices = Files.list(sysBlock)) {
            for (Path dir : devices.filter(d -> d.getFileName().toString().startsWith("dm-")).sorted().toList()) {
                if (read(dir.resolve("dm/name")).equals(name)) {
                    return Optional.of(mapped(name, dir));
                }
            }
            return Optional.empty();
        } catch (IOException e) {
            throw new DeviceException("cannot list " + sysBlock + ": " + e.getMessage(), e);
        }
    }

    private static MappedDevice mapped(String name, Path dir) throws IOException, DeviceException {
        List<Path> slaves;
        try (Stream<Path> listed = Files.list(dir.resolve("slaves"))) {
            slaves = listed.toList();
        }
        if (slaves.size() != 1) {
            throw new DeviceException("mapping " + name + " (" + dir.getFileName() + ") maps " + slaves.size() + " devices, not one");
        }
        try {
            return new MappedDevice(name, Path.of("/dev").resolve(dir.getFileName().toString()), DeviceNumber.parse(read(dir.resolve("dev"))),
                    Path.of("/dev").resolve(slaves.getFirst().getFileName().toString()), DeviceNumber.parse(read(slaves.getFirst().resolve("dev"))),
                    Long.parseLong(read(dir.resolve("size"))) * SECTOR_BYTES);
        } catch (IllegalArgumentException e) {
            throw new DeviceException("unexpected sysfs entries for mapping " + name + " in " + dir + ": " + e.getMessage(), e);
        }
    }

    private static String read(Path file) throws IOException {
        return Files.exists(file) ? Files.readString(file).strip() : "";
    }

    private CommandResult run(byte[] input, String... argv) throws DeviceException {
        try {
            return commands.run(TIMEOUT, input, argv);
        } catch (CommandException e) {
            throw new DeviceException(e.getMessage(), e);
        }
    }

    private static String absolute(Path device) {
        return device.toAbsolutePath().normalize().toString();
    }
}
