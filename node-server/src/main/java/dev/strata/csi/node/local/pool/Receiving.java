package dev.strata.csi.node.local.pool;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;

/**
 * What one stream of another node's content is written into, as the node agent's receiver drives
 * it: a RECEIVING volume ({@link IncomingCopies}) or a RECEIVING snapshot copy
 * ({@link SnapshotCopies}). Every step writes the record before it acts; the caller holds the
 * name's lock.
 */
public interface Receiving {

    /**
     * What the record says: the storage's capacity, whether it is to hold encrypted bytes (a
     * snapshot copy takes whatever its stream says: {@code encryption} false), the content it holds
     * ({@code tag}: the sender's) and how much of it is on disk, synced, and the base snapshot it
     * was built on (empty: none).
     */
    record Progress(long capacityBytes, boolean checksEncryption, boolean encrypted, String tag, long receivedBytes, String baseSnapshot) {}

    /** The record as it is; FAILED_PRECONDITION when it is not being received. */
    Progress progress() throws IOException;

    /** Starts over, for the content {@code tag} names (other content than it had): empty again, or the base's again. */
    Progress restart(String tag) throws IOException, DeviceException;

    /** Records that everything below {@code receivedBytes} is on disk, synced. */
    void receivedUpTo(long receivedBytes) throws IOException;

    /** The storage, open for writing until closed. */
    IncomingContent open() throws IOException, DeviceException;

    /** Removes what was received, record and all: the content was refused (DATA_LOSS), so the retry starts over. */
    void remove() throws IOException, DeviceException, MountException;
}
