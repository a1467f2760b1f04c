package dev.strata.csi.node.local.crypt;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.BlockDevice;
import java.nio.file.Path;

/**
 * An open dm-crypt mapping: an encrypted volume's plaintext view of its loop device.
 *
 * @param name      the mapping's device-mapper name ({@link VolumeEncryption#mappingName})
 * @param device    its node in /dev ({@code /dev/dm-N}, which devtmpfs makes with or without udev)
 * @param backing   the device it maps: the volume's loop device, or its logical volume's {@code /dev/dm-N}
 * @param backingNumber that device's number, by which it is matched with the pool's device of the volume (a logical
 *                  volume's path there is another node of the same device)
 * @param sizeBytes its size: the backing device's less the LUKS2 header
 */
public record MappedDevice(String name, Path device, DeviceNumber number, Path backing, DeviceNumber backingNumber, long sizeBytes)
        implements BlockDevice {

    @Override
    public DeviceNumber deviceNumber() {
        return number;
    }
}
