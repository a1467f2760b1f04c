package dev.strata.csi.node.local.crypt;

import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.BlockDevice;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.fs.Filesystems;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.util.Map;
import java.util.Optional;

/**
 * Encryption at rest of a local volume (StorageClass {@code encryption: luks2}): the steps of
 * stage, unstage and expansion that put a dm-crypt mapping between the volume's loop device and
 * its filesystem. The image file only ever holds the LUKS2 header and ciphertext; the passphrase
 * comes with each call's secrets and is never kept, logged or quoted.
 *
 * <p>The header is written once, on a device that holds no signature at all and whose record says
 * no filesystem was ever made and it was never used as a raw block device: the same two signs of
 * blankness the filesystem's format needs. A missing or wrong passphrase is an error, never a
 * format. The mapping's name comes from the volume's name, so a restarted node-server finds the
 * mappings its previous process opened.
 */
public final class VolumeEncryption {

    static final String LUKS_SIGNATURE = "crypto_LUKS";
    private static final String PREFIX = "strata-";

    private final EncryptedDevices devices;
    private final Filesystems filesystems;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    public VolumeEncryption(EncryptedDevices devices, Filesystems filesystems, Crashes<CrashPoint> crashes, Log log) {
        this.devices = devices;
        this.filesystems = filesystems;
        this.crashes = crashes;
        this.log = log;
    }

    /** The device-mapper name of the volume's mapping. */
    public static String mappingName(String volume) {
        return PREFIX + volume;
    }

    /**
     * The stage step: the volume's mapping over {@code volumeDevice} (its loop device or logical volume), opened with the passphrase from the
     * node-stage {@code secrets} (the header written first on a blank, never used volume), or the
     * one open already.
     */
    public MappedDevice open(LocalVolumeId id, ImageRecord record, BlockDevice volumeDevice, Map<String, String> secrets) throws Exception {
        String name = mappingName(id.name());
        Optional<MappedDevice> open = devices.find(name);
        if (open.isPresent()) {
            if (!open.get().backing().equals(volumeDevice.device())) {
                throw CsiException.failedPrecondition("volume " + id + ": mapping " + name + " is open over " + open.get().backing()
                        + ", not over the volume's device " + volumeDevice.device() + "; close it first (cryptsetup close " + name + ")");
            }
            return open.get();
        }
        Passphrase passphrase = passphrase(id, secrets, "NodeStageVolume", "node-stage");
        Optional<String> holds = filesystems.probe(volumeDevice.device());
        if (holds.isEmpty()) {
            if (!record.getFilesystem().isEmpty() || record.getUsedAsBlock()) {
                throw CsiException.failedPrecondition("volume " + id + " should hold data (its record says "
                        + (record.getUsedAsBlock() ? "it was used as a raw block device" : "it holds " + record.getFilesystem())
                        + ") but no LUKS header is found on " + volumeDevice.device() + "; the driver does not format it");
            }
            devices.format(volumeDevice.device(), passphrase);
            log.info("encrypted volume formatted (LUKS2)", "volume", id, "device", volumeDevice.device());
            crashes.reach(CrashPoint.STAGE_ENCRYPTION_FORMATTED);
        } else if (!holds.get().equals(LUKS_SIGNATURE)) {
            throw CsiException.failedPrecondition("volume " + id + " is to be encrypted but holds " + holds.get()
                    + " without encryption; the driver never formats a volume with data");
        }
        MappedDevice mapped;
        try {
            mapped = devices.open(volumeDevice.device(), name, passphrase);
        } catch (WrongPassphraseException e) {
            throw wrongPassphrase(id, "node-stage");
        }
        log.info("encrypted volume opened", "volume", id, "mapping", name, "device", mapped.device());
        crashes.reach(CrashPoint.STAGE_ENCRYPTION_OPENED);
        return mapped;
    }

    /** The volume's mapping, when it is open. */
    public Optional<MappedDevice> find(String volume) throws DeviceException {
        return devices.find(mappingName(volume));
    }

    /** The unstage step, once nothing is mounted from the mapping: closed; nothing to do when it is not open. */
    public void close(LocalVolumeId id) throws DeviceException {
        String name = mappingName(id.name());
        if (devices.find(name).isEmpty()) {
            return;
        }
        devices.close(name);
        log.info("encrypted volume closed", "volume", id, "mapping", name);
        crashes.reach(CrashPoint.UNSTAGE_ENCRYPTION_CLOSED);
    }

    /** The expansion step, once the loop device has grown: the open mapping grows to fill it, with the node-expand secret's passphrase. */
    public MappedDevice resize(LocalVolumeId id, Map<String, String> secrets) throws Exception {
        String name = mappingName(id.name());
        devices.find(name).orElseThrow(() -> CsiException.failedPrecondition("volume " + id + " is encrypted and not staged: "
                + "its mapping " + name + " is not open"));
        Passphrase passphrase = passphrase(id, secrets, "NodeExpandVolume", "node-expand");
        try {
            devices.resize(name, passphrase);
        } catch (WrongPassphraseException e) {
            throw wrongPassphrase(id, "node-expand");
        }
        return devices.find(name).orElseThrow(() -> CsiException.internal("mapping " + name + " closed while it was resized"));
    }

    private static Passphrase passphrase(LocalVolumeId id, Map<String, String> secrets, String call, String secret) {
        return Passphrase.from(secrets).orElseThrow(() -> CsiException.invalidArgument("volume " + id + " is encrypted: " + call
                + " needs its passphrase under the key '" + LocalParameters.PASSPHRASE_SECRET_KEY + "' of the " + secret
                + " secret (the StorageClass's csi.storage.k8s.io/" + secret + "-secret-name and -namespace)"));
    }

    private static CsiException wrongPassphrase(LocalVolumeId id, String secret) {
        return CsiException.permissionDenied("volume " + id + ": the passphrase in the " + secret
                + " secret opens no key slot of its LUKS2 header");
    }
}
