package dev.strata.csi.node.local.crypt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.linux.FileIdentity;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.fs.Filesystems;
import dev.strata.csi.node.local.image.LoopDevice;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The stage, unstage and expansion steps of encryption at rest, on the in-memory stand-in for cryptsetup. */
class VolumeEncryptionTest {

    private static final String KEY = "correct horse battery staple";
    private static final LocalVolumeId ID = new LocalVolumeId("node-a", "pvc-1");
    private static final LoopDevice LOOP = new LoopDevice(Path.of("/dev/loop7"), Path.of("/pool/pvc-1.img"),
            new FileIdentity(new DeviceNumber(8, 1), 12), false, new DeviceNumber(7, 7), true);
    private static final ImageRecord NEW = ImageRecord.newBuilder().setName("pvc-1").setEncrypted(true).build();

    private final InMemoryEncryptedDevices devices = new InMemoryEncryptedDevices();
    /** What blkid finds on each device; none: blank. */
    private final Map<Path, String> signatures = new HashMap<>();
    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    private final VolumeEncryption encryption = new VolumeEncryption(devices, new Filesystems() {
        @Override
        public Optional<String> probe(Path device) {
            return Optional.ofNullable(signatures.get(device));
        }

        @Override
        public Optional<String> formatIfBlank(Path device, String fsType) {
            throw new AssertionError("no filesystem is made here");
        }

        @Override
        public void grow(Path device, Path mountPoint, String fsType) {
            throw new AssertionError("no filesystem grows here");
        }
    }, Crashes.none(), new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 5));

    private static Map<String, String> secrets(String passphrase) {
        return Map.of("passphrase", passphrase);
    }

    private void formatted(String passphrase) throws Exception {
        encryption.open(ID, NEW, LOOP, secrets(passphrase));
        encryption.close(ID);
        signatures.put(LOOP.device(), VolumeEncryption.LUKS_SIGNATURE);
        devices.calls.clear();
    }

    @AfterEach
    void noPassphraseInTheLog() {
        String log = logged.toString(StandardCharsets.UTF_8);
        assertFalse(log.contains(KEY) || log.contains("wrong-key"), "a passphrase reached the log:\n" + log);
    }

    @Test
    void aBlankNewVolumeIsFormattedOnceThenOpened() throws Exception {
        MappedDevice mapped = encryption.open(ID, NEW, LOOP, secrets(KEY));
        assertEquals("strata-pvc-1", mapped.name());
        assertEquals(LOOP.device(), mapped.backing());
        assertEquals(List.of("format /dev/loop7", "open /dev/loop7 strata-pvc-1"), devices.calls);
        assertTrue(logged.toString(StandardCharsets.UTF_8).contains("encrypted volume formatted (LUKS2)"));

        encryption.close(ID);
        signatures.put(LOOP.device(), VolumeEncryption.LUKS_SIGNATURE);
        devices.calls.clear();
        encryption.open(ID, NEW, LOOP, secrets(KEY));
        assertEquals(List.of("open /dev/loop7 strata-pvc-1"), devices.calls, "a device with a LUKS header is opened, never formatted again");
    }

    @Test
    void anOpenMappingIsTakenAsItIsByARepeatedStage() throws Exception {
        MappedDevice first = encryption.open(ID, NEW, LOOP, secrets(KEY));
        devices.calls.clear();
        assertEquals(first, encryption.open(ID, NEW, LOOP, secrets(KEY)));
        assertEquals(List.of(), devices.calls);
    }

    @Test
    void aMappingOpenOverAnotherDeviceIsRefused() throws Exception {
        formatted(KEY);
        LoopDevice other = new LoopDevice(Path.of("/dev/loop9"), LOOP.backingFile(), LOOP.backing(), false, new DeviceNumber(7, 9), true);
        devices.headers.put(other.device(), KEY);
        encryption.open(ID, NEW, other, secrets(KEY));
        var e = assertThrows(CsiException.class, () -> encryption.open(ID, NEW, LOOP, secrets(KEY)));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
    }

    @Test
    void aWrongPassphraseIsPermissionDeniedAndNeverAFormat() throws Exception {
        formatted(KEY);
        var e = assertThrows(CsiException.class, () -> encryption.open(ID, NEW, LOOP, secrets("wrong-key")));
        assertEquals(Status.Code.PERMISSION_DENIED, e.code());
        assertFalse(e.getMessage().contains("wrong-key"), e.getMessage());
        assertEquals(List.of("open /dev/loop7 strata-pvc-1"), devices.calls);
        assertEquals(Optional.empty(), encryption.find("pvc-1"));
    }

    @Test
    void aMissingOrEmptyPassphraseIsInvalidArgumentNamingTheSecret() throws Exception {
        for (Map<String, String> secrets : List.of(Map.<String, String>of(), secrets(""), Map.of("key", KEY))) {
            var e = assertThrows(CsiException.class, () -> encryption.open(ID, NEW, LOOP, secrets));
            assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
            assertTrue(e.getMessage().contains("'passphrase'") && e.getMessage().contains("node-stage-secret-name"), e.getMessage());
            assertFalse(e.getMessage().contains(KEY), e.getMessage());
        }
        assertEquals(List.of(), devices.calls, "nothing formatted or opened without a key");
    }

    @Test
    void aDeviceHoldingAPlainFilesystemIsNeverFormatted() {
        signatures.put(LOOP.device(), "ext4");
        var e = assertThrows(CsiException.class, () -> encryption.open(ID, NEW, LOOP, secrets(KEY)));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
        assertTrue(e.getMessage().contains("holds ext4"), e.getMessage());
        assertEquals(List.of(), devices.calls);
    }

    @Test
    void aBlankProbeOfAVolumeWhoseRecordSaysItHoldsDataIsNeverFormatted() {
        for (ImageRecord record : List.of(NEW.toBuilder().setFilesystem("xfs").build(), NEW.toBuilder().setUsedAsBlock(true).build())) {
            var e = assertThrows(CsiException.class, () -> encryption.open(ID, record, LOOP, secrets(KEY)));
            assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
        }
        assertEquals(List.of(), devices.calls);
    }

    @Test
    void closeIsIdempotent() throws Exception {
        encryption.open(ID, NEW, LOOP, secrets(KEY));
        encryption.close(ID);
        encryption.close(ID);
        assertEquals(Optional.empty(), encryption.find("pvc-1"));
        assertEquals(1, devices.calls.stream().filter(call -> call.startsWith("close")).count(), "a closed mapping is not closed again");
    }

    @Test
    void resizeNeedsTheNodeExpandSecretsPassphraseAndAnOpenMapping() throws Exception {
        var notOpen = assertThrows(CsiException.class, () -> encryption.resize(ID, secrets(KEY)));
        assertEquals(Status.Code.FAILED_PRECONDITION, notOpen.code());
        encryption.open(ID, NEW, LOOP, secrets(KEY));
        var missing = assertThrows(CsiException.class, () -> encryption.resize(ID, Map.of()));
        assertEquals(Status.Code.INVALID_ARGUMENT, missing.code());
        assertTrue(missing.getMessage().contains("node-expand-secret-name"), missing.getMessage());
        var wrong = assertThrows(CsiException.class, () -> encryption.resize(ID, secrets("wrong-key")));
        assertEquals(Status.Code.PERMISSION_DENIED, wrong.code());
        assertEquals("strata-pvc-1", encryption.resize(ID, secrets(KEY)).name());
    }

    @Test
    void aPassphraseNeverShowsInItsTextForm() {
        Passphrase passphrase = Passphrase.from(secrets(KEY)).orElseThrow();
        assertEquals("[redacted]", passphrase.toString());
        assertEquals(KEY, new String(passphrase.bytes(), StandardCharsets.UTF_8));
    }
}
