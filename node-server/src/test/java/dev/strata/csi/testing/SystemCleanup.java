package dev.strata.csi.testing;

import static org.junit.jupiter.api.Assertions.fail;

import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.Mounter;
import dev.strata.csi.mount.SystemMounter;
import dev.strata.csi.system.Command;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Leaves no mount behind a test that made them, whatever state it failed in. */
public final class SystemCleanup {

    private SystemCleanup() {}

    /** Unmounts everything at or below {@code dir}, the mounts on top first. */
    public static void release(Path dir) throws Exception {
        Path real = dir.toRealPath();
        Mounter mounter = new SystemMounter(new Command());
        List<String> problems = new ArrayList<>();
        for (MountPoint mount : mounter.table().under(real).reversed()) {
            try {
                mounter.unmount(mount.mountPoint());
            } catch (Exception e) {
                problems.add(e.getMessage());
            }
        }
        if (!mounter.table().under(real).isEmpty()) {
            fail("could not clean up " + real + ": " + problems);
        }
    }
}
