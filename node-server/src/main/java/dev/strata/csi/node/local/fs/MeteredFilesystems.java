package dev.strata.csi.node.local.fs;

import dev.strata.csi.metrics.SystemSteps;
import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;
import java.util.Optional;

/**
 * {@link Filesystems} whose mkfs runs are timed as the step {@code mkfs} (a device that was not
 * blank made none), and filesystem growth as {@code resize}.
 */
public final class MeteredFilesystems implements Filesystems {

    private final Filesystems filesystems;
    private final SystemSteps steps;

    public MeteredFilesystems(Filesystems filesystems, SystemSteps steps) {
        this.filesystems = filesystems;
        this.steps = steps;
    }

    @Override
    public Optional<String> probe(Path device) throws DeviceException {
        return steps.time("blkid", () -> filesystems.probe(device));
    }

    @Override
    public Optional<String> formatIfBlank(Path device, String fsType) throws DeviceException {
        long start = System.nanoTime();
        boolean ok = false;
        Optional<String> existing = Optional.empty();
        try {
            existing = filesystems.formatIfBlank(device, fsType);
            ok = true;
            return existing;
        } finally {
            if (existing.isEmpty()) {
                steps.record("mkfs", start, ok);
            }
        }
    }

    @Override
    public void grow(Path device, Path mountPoint, String fsType) throws DeviceException {
        steps.time("resize", () -> filesystems.grow(device, mountPoint, fsType));
    }
}
