package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;
import java.util.Optional;

/** Volumes as most pool tests make them: not encrypted, no thin overcommit. */
public final class PlainVolumes {

    private PlainVolumes() {}

    /** {@link VolumePool#create} of a plain volume, as the node agent calls it for a StorageClass without those keys. */
    public static Volume create(VolumePool pool, String name, long capacityBytes, Allocation allocation, Optional<ContentSource> source)
            throws IOException, DeviceException, MountException {
        return pool.create(name, capacityBytes, allocation, source, false, 1);
    }
}
