package dev.strata.csi.node.local.fs;

import dev.strata.csi.metrics.SystemSteps;
import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;

/** {@link FilesystemFreezer} whose freezes and thaws are timed as the steps {@code freeze} and {@code thaw}. */
public final class MeteredFilesystemFreezer implements FilesystemFreezer {

    private final FilesystemFreezer freezer;
    private final SystemSteps steps;

    public MeteredFilesystemFreezer(FilesystemFreezer freezer, SystemSteps steps) {
        this.freezer = freezer;
        this.steps = steps;
    }

    @Override
    public void freeze(Path mountPoint) throws DeviceException {
        steps.time("freeze", () -> freezer.freeze(mountPoint));
    }

    @Override
    public boolean thaw(Path mountPoint) throws DeviceException {
        return steps.time("thaw", () -> freezer.thaw(mountPoint));
    }
}
