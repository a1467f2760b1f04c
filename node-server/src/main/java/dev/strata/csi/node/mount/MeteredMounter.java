package dev.strata.csi.node.mount;

import dev.strata.csi.metrics.SystemSteps;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountTable;
import java.nio.file.Path;
import java.util.List;

/** A {@link Mounter} whose mounts and unmounts are timed as the steps {@code mount}, {@code bind_mount} and {@code umount}. */
public final class MeteredMounter implements Mounter {

    private final Mounter mounter;
    private final SystemSteps steps;

    public MeteredMounter(Mounter mounter, SystemSteps steps) {
        this.mounter = mounter;
        this.steps = steps;
    }

    @Override
    public void mount(String source, Path target, String fsType, List<String> options) throws MountException {
        steps.time("mount", () -> mounter.mount(source, target, fsType, options));
    }

    @Override
    public void bindMount(Path source, Path target, boolean readOnly) throws MountException {
        steps.time("bind_mount", () -> mounter.bindMount(source, target, readOnly));
    }

    @Override
    public void unmount(Path target) throws MountException {
        steps.time("umount", () -> mounter.unmount(target));
    }

    @Override
    public MountTable table() throws MountException {
        return mounter.table();
    }
}
