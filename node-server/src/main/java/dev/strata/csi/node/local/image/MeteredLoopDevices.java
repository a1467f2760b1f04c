package dev.strata.csi.node.local.image;

import dev.strata.csi.metrics.SystemSteps;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/** {@link LoopDevices} whose attach and detach are timed as the steps {@code losetup_attach} and {@code losetup_detach}. */
public final class MeteredLoopDevices implements LoopDevices {

    private final LoopDevices loops;
    private final SystemSteps steps;

    public MeteredLoopDevices(LoopDevices loops, SystemSteps steps) {
        this.loops = loops;
        this.steps = steps;
    }

    @Override
    public LoopDevice attach(Path image) throws DeviceException {
        return steps.time("losetup_attach", () -> loops.attach(image));
    }

    @Override
    public void detach(Path device) throws DeviceException {
        steps.time("losetup_detach", () -> loops.detach(device));
    }

    @Override
    public Optional<LoopDevice> find(Path image) throws DeviceException {
        return loops.find(image);
    }

    @Override
    public List<DeviceNumber> holders(LoopDevice device) throws DeviceException {
        return loops.holders(device);
    }

    @Override
    public List<LoopDevice> list() throws DeviceException {
        return loops.list();
    }

    @Override
    public long sizeBytes(Path device) throws DeviceException {
        return loops.sizeBytes(device);
    }

    @Override
    public void refreshCapacity(Path device) throws DeviceException {
        steps.time("losetup_set_capacity", () -> loops.refreshCapacity(device));
    }
}
