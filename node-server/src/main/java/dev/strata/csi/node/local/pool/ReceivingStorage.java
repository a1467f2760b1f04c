package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;
import java.util.Optional;

/** What {@link IncomingCopies} asks of its pool's storage: the steps that differ between an image file and a logical volume. */
interface ReceivingStorage {

    PoolKind kind();

    /** The new volume's record, with what the pool keeps of it; INVALID_ARGUMENT for what the pool does not make. */
    ImageRecord plan(ImageRecord.Builder record, double overcommitRatio) throws DeviceException;

    /** Removes what {@code existing} (CREATING, DELETING) left of the name; without a record, FAILED_PRECONDITION for storage of that name. */
    void clear(String name, Optional<ImageRecord> existing) throws IOException, DeviceException, MountException;

    /** Writes the first record once the pool has room for it (RESOURCE_EXHAUSTED otherwise): from then on it reserves its capacity. */
    void reserve(ImageRecord record) throws IOException, DeviceException, MountException;

    /** Makes the storage, empty, reading as what its record says ({@code receive_zeroes_gaps}). */
    void create(ImageRecord record) throws IOException, DeviceException;

    /** Makes the storage empty again, for other content. */
    void empty(ImageRecord record) throws IOException, DeviceException;

    /** The storage, open for one stream. */
    IncomingContent open(ImageRecord record) throws IOException, DeviceException;

    /** The agent API's image of a READY record, not attached. */
    Volume image(ImageRecord record);

    /** Removes the volume as the pool's delete does. */
    void delete(String name) throws IOException, DeviceException, MountException;
}
