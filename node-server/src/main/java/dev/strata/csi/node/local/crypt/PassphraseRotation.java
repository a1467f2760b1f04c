package dev.strata.csi.node.local.crypt;

import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.crypt.AcceptedPassphrases.Accepts;
import dev.strata.csi.system.Crashes;
import java.nio.file.Path;
import java.util.OptionalInt;

/**
 * Rotation of an encrypted volume's passphrase (docs/attributes.md): with the Secret's new
 * {@code passphrase} and its {@code previousPassphrase}, the new one goes into a free key slot of
 * the LUKS2 header (the volume key unwrapped with the previous one), then the previous one's slot
 * is wiped, authorised by the new one, which cryptsetup checks opens another slot first. The volume
 * stays open and in use; the volume key and the data do not change, only the key's wrapping.
 *
 * <p>The step reached is read from the header itself at each pass, never kept elsewhere: which
 * slot each passphrase opens. A crash after the add leaves a header both open, which the next pass
 * finishes; at no step does a header open with neither. A header restored from a snapshot cut
 * before the rotation (it opens with the previous passphrase only) is rotated the same way.
 */
public final class PassphraseRotation {

    /** LUKS2's key slots: a previous passphrase in more than one is removed from each, at most this many. */
    private static final int KEY_SLOTS = 32;

    private final EncryptedDevices devices;
    private final AcceptedPassphrases accepted;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    public PassphraseRotation(EncryptedDevices devices, AcceptedPassphrases accepted, Crashes<CrashPoint> crashes, Log log) {
        this.devices = devices;
        this.accepted = accepted;
        this.crashes = crashes;
        this.log = log;
    }

    /**
     * Brings {@code device}'s header to open with {@code current} only, from any step, and reports
     * what it accepts at each step.
     *
     * @throws WrongPassphraseException when neither passphrase opens the header: nothing is changed
     */
    public void rotate(LocalVolumeId id, Path device, Passphrase current, Passphrase previous) throws DeviceException {
        OptionalInt currentSlot = devices.slotOf(device, current);
        OptionalInt previousSlot = devices.slotOf(device, previous);
        if (currentSlot.isEmpty() && previousSlot.isEmpty()) {
            throw new WrongPassphraseException("neither passphrase opens a key slot of " + device);
        }
        if (currentSlot.isEmpty()) {
            accepted.report(id, Accepts.PREVIOUS);
            devices.addKey(device, previous, current);
            currentSlot = devices.slotOf(device, current);
            if (currentSlot.isEmpty()) {
                throw new DeviceException("cryptsetup luksAddKey on " + device + " succeeded, but the new passphrase opens no key slot;"
                        + " the previous one's slot is kept");
            }
            log.info("passphrase rotation: new passphrase added", "volume", id, "slot", currentSlot.getAsInt(),
                    "previous_slot", previousSlot.getAsInt());
            accepted.report(id, Accepts.BOTH);
            crashes.reach(CrashPoint.ROTATE_ENCRYPTION_KEY_ADDED);
        }
        for (int i = 0; i < KEY_SLOTS && previousSlot.isPresent(); i++) {
            accepted.report(id, Accepts.BOTH);
            devices.killSlot(device, previousSlot.getAsInt(), current);
            log.info("passphrase rotation: previous passphrase's key slot removed", "volume", id, "slot", previousSlot.getAsInt());
            crashes.reach(CrashPoint.ROTATE_ENCRYPTION_OLD_KEY_REMOVED);
            previousSlot = devices.slotOf(device, previous);
        }
        accepted.report(id, Accepts.CURRENT);
    }
}
