package dev.strata.csi.node.cgroup;

import dev.strata.csi.mount.DeviceNumber;
import java.io.IOException;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * An in-memory stand-in for {@link PodCgroups}, for fast tests of what is applied to which pod:
 * the pods that "have a cgroup" are the ones the test adds; the limits each holds per device are
 * kept as {@link SystemPodCgroups} would leave them in the kernel (NONE: no rule at all). A pod can
 * be made to fail, as a cgroup without the io controller does.
 */
public final class InMemoryPodCgroups implements PodCgroups {

    private final Set<PodUid> pods = new HashSet<>();
    private final Set<PodUid> failing = new HashSet<>();
    private final Map<PodUid, Map<DeviceNumber, DeviceLimits>> limits = new HashMap<>();
    private int writes;

    /** kubelet made the pod's cgroup. */
    public synchronized void addPod(PodUid pod) {
        pods.add(pod);
    }

    /** kubelet removed the pod's cgroup, and the limits in it with it. */
    public synchronized void removePod(PodUid pod) {
        pods.remove(pod);
        limits.remove(pod);
    }

    /** Writes into the pod's cgroup fail from now on. */
    public synchronized void failFor(PodUid pod) {
        failing.add(pod);
    }

    @Override
    public synchronized boolean limit(PodUid pod, DeviceNumber device, DeviceLimits wanted) throws IOException {
        if (!pods.contains(pod)) {
            return false;
        }
        if (failing.contains(pod) && wanted.none()) {
            return true; // as SystemPodCgroups: without the io controller there is no limit to remove
        }
        if (failing.contains(pod)) {
            throw new IOException("pod cgroup of " + pod + " has no io.max: the io controller is not enabled");
        }
        writes++;
        Map<DeviceNumber, DeviceLimits> devices = limits.computeIfAbsent(pod, p -> new HashMap<>());
        if (wanted.none()) {
            devices.remove(device);
        } else {
            devices.put(device, wanted);
        }
        return true;
    }

    /** The limits the pod's cgroup holds for the device; NONE when it has none. */
    public synchronized DeviceLimits of(PodUid pod, DeviceNumber device) {
        return limits.getOrDefault(pod, Map.of()).getOrDefault(device, DeviceLimits.NONE);
    }

    /** How many times limits were written into a cgroup. */
    public synchronized int writes() {
        return writes;
    }
}
