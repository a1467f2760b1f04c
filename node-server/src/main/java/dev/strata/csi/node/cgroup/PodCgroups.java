package dev.strata.csi.node.cgroup;

import dev.strata.csi.mount.DeviceNumber;
import java.io.IOException;

/**
 * The pods' cgroups kubelet makes, as far as the driver touches them: the IO limits of one device.
 * The seam between the driver and the kernel's cgroup files ({@link SystemPodCgroups}); tests of
 * what is applied where use an in-memory stand-in.
 */
public interface PodCgroups {

    /**
     * Sets the limits of {@code device} for the pod's processes ({@link DeviceLimits#NONE} removes
     * them; where the pod's cgroup cannot hold limits there is nothing to remove); the same limits
     * again change nothing. Returns false when the pod has no cgroup on
     * this node (not made yet, or removed with the pod): there is nothing to limit.
     */
    boolean limit(PodUid pod, DeviceNumber device, DeviceLimits limits) throws IOException;
}
