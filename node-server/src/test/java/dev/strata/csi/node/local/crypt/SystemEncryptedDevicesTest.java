package dev.strata.csi.node.local.crypt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.system.Commands;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cryptsetup command lines and the sysfs reading of {@link SystemEncryptedDevices}, with the
 * programs recorded instead of run and a sysfs tree made by the test as the kernel lays it out
 * (dm-N/dm/name, dev, size, slaves/). hack/luks-vm.sh runs the real thing (EncryptionTest).
 */
class SystemEncryptedDevicesTest {

    private static final String KEY = "s3cret passphrase";

    @TempDir
    Path sys;

    private final List<String> argvs = new ArrayList<>();
    private final List<String> inputs = new ArrayList<>();
    private int exitCode;
    private String stdout = "";

    private final Commands commands = new Commands() {
        @Override
        public CommandResult run(Duration timeout, String... argv) {
            argvs.add(String.join(" ", argv));
            inputs.add("");
            return new CommandResult(exitCode, stdout, exitCode == 0 ? "" : "No key available with this passphrase.\n");
        }

        @Override
        public CommandResult run(Duration timeout, byte[] input, String... argv) {
            CommandResult result = run(timeout, argv);
            inputs.set(inputs.size() - 1, new String(input, StandardCharsets.UTF_8));
            return result;
        }
    };

    private SystemEncryptedDevices devices() {
        return new SystemEncryptedDevices(commands, sys);
    }

    private void mapping(String dm, String name, String slave) throws Exception {
        Path dir = Files.createDirectories(sys.resolve(dm));
        Files.createDirectories(dir.resolve("dm"));
        Files.writeString(dir.resolve("dm/name"), name + "\n");
        Files.writeString(dir.resolve("dev"), "254:3\n");
        Files.writeString(dir.resolve("size"), "622592\n");
        Files.createDirectories(dir.resolve("slaves/" + slave));
        Files.writeString(dir.resolve("slaves/" + slave + "/dev"), "7:7\n");
    }

    private Passphrase key() {
        return Passphrase.from(Map.of("passphrase", KEY)).orElseThrow();
    }

    @Test
    void thePassphraseGoesOnStdinNeverOnTheCommandLine() throws Exception {
        mapping("dm-3", "strata-pvc-1", "loop7");
        SystemEncryptedDevices devices = devices();
        devices.format(Path.of("/dev/loop7"), key());
        devices.open(Path.of("/dev/loop7"), "strata-pvc-1", key());
        devices.resize("strata-pvc-1", key());
        assertEquals(List.of(
                "cryptsetup luksFormat --batch-mode --type luks2 --pbkdf argon2id --pbkdf-memory 65536 --key-file=- /dev/loop7",
                "cryptsetup open --type luks2 --key-file=- /dev/loop7 strata-pvc-1",
                "cryptsetup resize --key-file=- strata-pvc-1"), argvs);
        assertEquals(List.of(KEY, KEY, KEY), inputs);
        argvs.forEach(argv -> assertFalse(argv.contains(KEY), argv));
    }

    @Test
    void exitStatus2IsAWrongPassphraseWhoseMessageHoldsNoKey() {
        exitCode = 2;
        var e = assertThrows(WrongPassphraseException.class, () -> devices().open(Path.of("/dev/loop7"), "strata-pvc-1", key()));
        assertFalse(e.getMessage().contains(KEY), e.getMessage());
        assertThrows(WrongPassphraseException.class, () -> devices().resize("strata-pvc-1", key()));
    }

    @Test
    void otherFailuresAreDeviceErrorsWithCryptsetupsMessage() {
        exitCode = 1;
        var e = assertThrows(DeviceException.class, () -> devices().format(Path.of("/dev/loop7"), key()));
        assertEquals(DeviceException.class, e.getClass());
        assertFalse(e.getMessage().contains(KEY), e.getMessage());
    }

    @Test
    void findReadsTheMappingFromSysfsByName() throws Exception {
        mapping("dm-0", "other", "sda");
        mapping("dm-3", "strata-pvc-1", "loop7");
        assertEquals(Optional.of(new MappedDevice("strata-pvc-1", Path.of("/dev/dm-3"), new DeviceNumber(254, 3), Path.of("/dev/loop7"),
                new DeviceNumber(7, 7), 622592L * 512)), devices().find("strata-pvc-1"));
        assertEquals(Optional.empty(), devices().find("strata-pvc-2"));
    }

    @Test
    void closeOfAMappingThatIsNotOpenRunsNothing() throws Exception {
        devices().close("strata-pvc-1");
        assertEquals(List.of(), argvs);
        mapping("dm-3", "strata-pvc-1", "loop7");
        devices().close("strata-pvc-1");
        assertEquals(List.of("cryptsetup close strata-pvc-1"), argvs);
    }

    @Test
    void aRotationsStepsTakeBothPassphrasesOnStdinEachByItsLength() throws Exception {
        Passphrase previous = Passphrase.from(Map.of("passphrase", "old-one")).orElseThrow();
        stdout = "No usable token is available.\nKey slot 3 unlocked.\nCommand successful.\n";
        assertEquals(java.util.OptionalInt.of(3), devices().slotOf(Path.of("/dev/dm-4"), key()));
        devices().addKey(Path.of("/dev/dm-4"), previous, key());
        devices().killSlot(Path.of("/dev/dm-4"), 0, key());
        assertEquals(List.of(
                "cryptsetup --verbose open --test-passphrase --type luks2 --key-file=- /dev/dm-4",
                "cryptsetup luksAddKey --batch-mode --pbkdf argon2id --pbkdf-memory 65536 --key-file=- --keyfile-size=7 --new-keyfile-size="
                        + KEY.length() + " /dev/dm-4 -",
                "cryptsetup luksKillSlot --batch-mode --key-file=- /dev/dm-4 0"), argvs);
        assertEquals(List.of(KEY, "old-one" + KEY, KEY), inputs);
        argvs.forEach(argv -> assertFalse(argv.contains(KEY) || argv.contains("old-one"), argv));
    }

    @Test
    void exitStatus2OfARotationStepIsAWrongPassphraseOrNoSlot() throws Exception {
        exitCode = 2;
        assertEquals(java.util.OptionalInt.empty(), devices().slotOf(Path.of("/dev/dm-4"), key()));
        assertThrows(WrongPassphraseException.class, () -> devices().addKey(Path.of("/dev/dm-4"), key(), key()));
        assertThrows(WrongPassphraseException.class, () -> devices().killSlot(Path.of("/dev/dm-4"), 0, key()));
    }
}
