package dev.strata.csi.node.local.crypt;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.system.Crashes;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The steps of a passphrase rotation from each state a header can be in, on the in-memory stand-in for cryptsetup's key slots. */
class PassphraseRotationTest {

    private static final LocalVolumeId ID = new LocalVolumeId("node-a", "pvc-1");
    private static final Path DEVICE = Path.of("/dev/dm-4");

    private final InMemoryEncryptedDevices devices = new InMemoryEncryptedDevices();
    private final Log log = new Log(new PrintStream(OutputStream.nullOutputStream()), 5);
    private final AcceptedPassphrases accepted = new AcceptedPassphrases(new PrometheusRegistry(), log);
    private final PassphraseRotation rotation = new PassphraseRotation(devices, accepted, Crashes.none(), log);

    private static Passphrase key(String text) {
        return Passphrase.from(Map.of("passphrase", text)).orElseThrow();
    }

    private List<String> header(String... slots) {
        List<String> all = new ArrayList<>(Arrays.asList(new String[InMemoryEncryptedDevices.KEY_SLOTS]));
        for (int i = 0; i < slots.length; i++) {
            all.set(i, slots[i]);
        }
        devices.headers.put(DEVICE, all.toArray(String[]::new));
        return all;
    }

    @Test
    void fromEachStateTheHeaderEndsOpeningWithTheNewPassphraseOnly() throws Exception {
        for (String[] start : List.of(new String[] {"old"}, new String[] {"old", "new"}, new String[] {"new", "old"},
                new String[] {null, "new"}, new String[] {"old", "x", "old"})) {
            header(start);
            rotation.rotate(ID, DEVICE, key("new"), key("old"));
            List<String> slots = devices.slots(DEVICE);
            assertEquals(1, slots.stream().filter("new"::equals).count(), Arrays.toString(start) + " -> " + slots);
            assertEquals(0, slots.stream().filter("old"::equals).count(), Arrays.toString(start) + " -> " + slots);
            assertEquals(java.util.Optional.of(AcceptedPassphrases.Accepts.CURRENT), accepted.of(ID));
        }
    }

    @Test
    void neitherPassphraseOpeningIsAWrongPassphraseAndChangesNothing() {
        List<String> before = header("other");
        assertThrows(WrongPassphraseException.class, () -> rotation.rotate(ID, DEVICE, key("new"), key("old")));
        assertEquals(before, devices.slots(DEVICE));
    }

    @Test
    void aFullHeaderKeepsThePreviousPassphrase() {
        String[] full = new String[InMemoryEncryptedDevices.KEY_SLOTS];
        Arrays.fill(full, "other");
        full[5] = "old";
        header(full);
        assertThrows(DeviceException.class, () -> rotation.rotate(ID, DEVICE, key("new"), key("old")));
        assertEquals("old", devices.slots(DEVICE).get(5), "never a header neither opens");
        assertEquals(java.util.Optional.of(AcceptedPassphrases.Accepts.PREVIOUS), accepted.of(ID));
    }

    @Test
    void aKillCutAfterTheAddLeavesBothAndTheNextPassFinishesWithoutASecondAdd() throws Exception {
        header("old");
        devices.failKillSlot = true;
        assertThrows(DeviceException.class, () -> rotation.rotate(ID, DEVICE, key("new"), key("old")));
        assertEquals(Arrays.asList("old", "new"), devices.slots(DEVICE).subList(0, 2), "both open it");
        assertEquals(java.util.Optional.of(AcceptedPassphrases.Accepts.BOTH), accepted.of(ID));
        devices.failKillSlot = false;
        devices.calls.clear();
        rotation.rotate(ID, DEVICE, key("new"), key("old"));
        assertEquals(List.of("test /dev/dm-4", "test /dev/dm-4", "killSlot /dev/dm-4 0", "test /dev/dm-4"), devices.calls);
        assertEquals(Arrays.asList(null, "new"), devices.slots(DEVICE).subList(0, 2));
    }

    @Test
    void theStandInRefusesToKillTheSlotOfTheOnlyPassphraseGiven() {
        header("new");
        assertThrows(WrongPassphraseException.class, () -> devices.killSlot(DEVICE, 0, key("new")), "as luksKillSlot does");
        assertThrows(DeviceException.class, () -> devices.killSlot(DEVICE, 3, key("new")), "an empty slot");
    }
}
