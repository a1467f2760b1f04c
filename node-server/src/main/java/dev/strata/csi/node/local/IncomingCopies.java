package dev.strata.csi.node.local;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.mount.MountException;
import java.io.IOException;
import java.time.Duration;
import java.util.List;

/**
 * A pool's side of the copies it receives from other nodes (ReceiveImage, WriteContent): a volume
 * made in the state RECEIVING, its content written in order with its progress recorded, so that a
 * stream cut short resumes where it got to, then checked and READY. Every step writes the record
 * before it acts, as the pool's own calls do; the pool's {@code reconcile()} leaves a RECEIVING
 * volume for its retried copy (or for {@code AbandonedCopies}). Callers hold the volume's lock.
 */
public interface IncomingCopies {

    /**
     * The volume {@code name} that is to receive content from another node ({@code source}: what
     * that node calls it): made empty in the state RECEIVING, its capacity reserved as a create's,
     * or the one an earlier attempt left, with how far it got; a READY one is returned as it is.
     * ALREADY_EXISTS when the name is taken with another size, allocation or source.
     */
    ImageRecord receive(String name, long capacityBytes, Allocation allocation, ContentSource source, boolean encrypted,
            double overcommitRatio) throws IOException, DeviceException, MountException;

    /** The RECEIVING volume, for a transfer's next step; FAILED_PRECONDITION when it is not being received. */
    ImageRecord receiving(String name) throws IOException;

    /** Starts the RECEIVING volume over, empty, for the content {@code tag} names (another content than it had). */
    ImageRecord restart(String name, String tag) throws IOException, DeviceException;

    /** Records that everything below {@code receivedBytes} of the RECEIVING volume's content is on disk, synced. */
    void receivedUpTo(String name, long receivedBytes) throws IOException;

    /** The RECEIVING volume's storage, open for writing until closed. */
    IncomingContent open(String name) throws IOException, DeviceException;

    /**
     * The RECEIVING volume is complete, synced and checked: READY from now on, holding the
     * {@code filesystem} its source's record named (or raw block content), never to be formatted,
     * and encrypted when its source is; a filesystem from a smaller source grows at the next stage.
     */
    Image finish(String name, long sourceBytes, String filesystem, boolean usedAsBlock, boolean encrypted) throws IOException;

    /** The RECEIVING volumes, by name: the candidates for {@link #removeIfAbandoned}. */
    List<String> names() throws IOException;

    /**
     * Removes the RECEIVING volume {@code name}, as a delete does, when no transfer step has touched
     * it for {@code expiry}: a copy nobody comes back for. Returns whether it was removed.
     */
    boolean removeIfAbandoned(String name, Duration expiry) throws IOException, DeviceException, MountException;
}
