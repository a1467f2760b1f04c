package dev.strata.csi.node.local;

import dev.strata.csi.mount.DeviceNumber;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * The devices stacked on a block device, as sysfs lists them ({@code /sys/dev/block/M:m/holders}):
 * an encrypted volume's dm-crypt mapping over its loop device or logical volume. The real
 * {@link dev.strata.csi.node.local.image.LoopDevices} and {@link dev.strata.csi.node.local.lvm.LogicalVolumes} ask here.
 */
public final class DeviceHolders {

    private static final Path SYS_DEV_BLOCK = Path.of("/sys/dev/block");

    private DeviceHolders() {
    }

    /** The numbers of the devices holding {@code device}; none when it has none, or is gone. */
    public static List<DeviceNumber> of(DeviceNumber device) throws DeviceException {
        Path dir = SYS_DEV_BLOCK.resolve(device.major() + ":" + device.minor()).resolve("holders");
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> holders = Files.list(dir)) {
            List<DeviceNumber> numbers = new ArrayList<>();
            for (Path holder : holders.toList()) {
                numbers.add(DeviceNumber.parse(Files.readString(holder.resolve("dev")).strip()));
            }
            return numbers;
        } catch (IOException e) {
            throw new DeviceException("cannot read the holders of device " + device.major() + ":" + device.minor() + " in " + dir + ": "
                    + e.getMessage(), e);
        }
    }
}
