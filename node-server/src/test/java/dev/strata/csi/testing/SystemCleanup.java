package dev.strata.csi.testing;

import static org.junit.jupiter.api.Assertions.fail;

import dev.strata.csi.backend.local.LoopDevice;
import dev.strata.csi.backend.local.LoopDevices;
import dev.strata.csi.backend.local.SystemLoopDevices;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.Mounter;
import dev.strata.csi.mount.SystemMounter;
import dev.strata.csi.system.Command;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Leaves no mount or loop device behind a test that made them, whatever state it failed in. */
public final class SystemCleanup {

    /** Enough for the deepest order the tests build: a mounted loop device on an image on a mount. */
    private static final int ROUNDS = 4;

    private SystemCleanup() {}

    /**
     * Unmounts everything at or below {@code dir} and detaches every loop device whose image is
     * below it. A mount can hold an image, and an image's device can be mounted, so it goes round
     * until nothing is left.
     */
    public static void release(Path dir) throws Exception {
        Path real = dir.toRealPath();
        Mounter mounter = new SystemMounter(new Command());
        LoopDevices loops = new SystemLoopDevices(new Command());
        List<String> problems = new ArrayList<>();
        for (int round = 0; round < ROUNDS; round++) {
            problems.clear();
            for (MountPoint mount : mounter.table().under(real).reversed()) {
                try {
                    mounter.unmount(mount.mountPoint());
                } catch (Exception e) {
                    problems.add(e.getMessage());
                }
            }
            for (LoopDevice device : loops.list()) {
                if (device.backingFile().startsWith(real)) {
                    try {
                        loops.detach(device.device());
                    } catch (Exception e) {
                        problems.add(e.getMessage());
                    }
                }
            }
            boolean left = !mounter.table().under(real).isEmpty()
                    || loops.list().stream().anyMatch(device -> device.backingFile().startsWith(real));
            if (!left) {
                return;
            }
        }
        fail("could not clean up " + real + ": " + problems);
    }
}
