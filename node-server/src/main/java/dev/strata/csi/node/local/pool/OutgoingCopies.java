package dev.strata.csi.node.local.pool;

import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;

/**
 * A pool's side of the copies other nodes receive of its volumes and snapshots (ReadContent):
 * the content, readable until closed. The caller holds the volume's or the snapshot's lock for as
 * long: a volume against attachment, a snapshot against deletion.
 */
public interface OutgoingCopies {

    /**
     * The content of the READY volume {@code name}, which must be detached: FAILED_PRECONDITION
     * while attached (a copy of a volume in use is read from a snapshot of it, which is
     * consistent). NOT_FOUND when there is no such volume.
     */
    OutgoingContent volume(String name) throws IOException, DeviceException;

    /** The content of the READY snapshot {@code name}; NOT_FOUND when there is none. */
    OutgoingContent snapshot(String name) throws IOException, DeviceException;
}
