package dev.strata.csi.node.local;

import dev.strata.csi.backend.local.VolumeId;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.Source;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/**
 * The records of volumes being received, as every pool keeps them ({@link IncomingCopies}): each
 * RECEIVING record is written with the time of its step, so that one no step touches for the
 * abandoned-copy expiry can be told apart.
 */
final class ReceivingRecords {

    /** How a pool removes a volume: its delete. */
    @FunctionalInterface
    interface Removal {
        void delete(String name) throws IOException, DeviceException, MountException;
    }

    private final RecordStore records;
    private final Clock clock;
    private final Log log;

    ReceivingRecords(RecordStore records, Clock clock, Log log) {
        this.records = records;
        this.clock = clock;
        this.log = log;
    }

    /**
     * The existing record of the volume a ReceiveImage names, when it is READY or RECEIVING with
     * what the request asks for (a RECEIVING one touched: the copy is back for it); empty when
     * there is none, or one the pool removes (CREATING, DELETING) before making it again.
     * ALREADY_EXISTS when it is there with another size, allocation, source or encryption.
     */
    Optional<ImageRecord> existing(String name, long capacityBytes, ImageRecord.Allocation allocation, Source from, boolean encrypted)
            throws IOException {
        VolumeId.checkName(name);
        Optional<ImageRecord> existing = records.read(name);
        if (existing.isEmpty()) {
            return existing;
        }
        ImageRecord record = existing.get();
        if (record.getState() != ImageRecord.State.READY && record.getState() != ImageRecord.State.RECEIVING) {
            return Optional.empty();
        }
        Optional<Source> has = record.hasSource() ? Optional.of(record.getSource()) : Optional.empty();
        if (record.getCapacityBytes() != capacityBytes || record.getAllocation() != allocation || !has.equals(Optional.of(from))
                || record.getEncrypted() != encrypted) {
            throw CsiException.alreadyExists("volume " + name + " exists with " + record.getCapacityBytes() + " bytes, "
                    + record.getAllocation() + ", " + ImagePool.describe(has) + (record.getEncrypted() ? ", encrypted" : "")
                    + "; asked for " + capacityBytes + " bytes, " + allocation + ", " + ImagePool.describe(Optional.of(from))
                    + " of another node" + (encrypted ? ", encrypted" : ""));
        }
        return Optional.of(record.getState() == ImageRecord.State.RECEIVING ? progressed(record.toBuilder()) : record);
    }

    /** The RECEIVING volume; FAILED_PRECONDITION when the volume is not being received. */
    ImageRecord receiving(String name) throws IOException {
        return records.read(name)
                .filter(record -> record.getState() == ImageRecord.State.RECEIVING)
                .orElseThrow(() -> CsiException.failedPrecondition("volume " + name + " is not being received on this node"));
    }

    /** Writes the RECEIVING record with the time of this transfer step: the volume is not abandoned. */
    ImageRecord progressed(ImageRecord.Builder record) throws IOException {
        ImageRecord written = record.setState(ImageRecord.State.RECEIVING).setReceiveProgressTime(ImagePool.timestamp(clock.instant())).build();
        records.write(written);
        return written;
    }

    /** A new start of the content {@code tag} names, recorded before the storage is emptied. */
    ImageRecord restarted(String name, String tag) throws IOException {
        return progressed(receiving(name).toBuilder().setReceiveTag(tag).setReceivedBytes(0));
    }

    void receivedUpTo(String name, long receivedBytes) throws IOException {
        progressed(receiving(name).toBuilder().setReceivedBytes(receivedBytes));
    }

    List<String> names() throws IOException {
        return records.all().stream().filter(record -> record.getState() == ImageRecord.State.RECEIVING).map(ImageRecord::getName).toList();
    }

    /**
     * Removes the RECEIVING volume with {@code removal} when no transfer step has touched it for
     * {@code expiry}: a copy nobody comes back for (its volume's PVC was deleted while
     * external-provisioner retried, and the provisioner restarted and forgot it), whose storage and
     * reserved capacity would stay forever. The caller holds the volume's lock, as every transfer
     * step does: a step either came first, and the volume is kept, or finds it gone.
     */
    boolean removeIfAbandoned(String name, Duration expiry, Removal removal) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> found = records.read(name).filter(record -> record.getState() == ImageRecord.State.RECEIVING);
        if (found.isEmpty()) {
            return false;
        }
        ImageRecord record = found.get();
        Instant last = Instant.ofEpochSecond(record.getReceiveProgressTime().getSeconds(), record.getReceiveProgressTime().getNanos());
        Duration idle = Duration.between(last, clock.instant());
        if (idle.compareTo(expiry) < 0) {
            return false;
        }
        removal.delete(name);
        log.warn("removed partly received volume: no transfer step for longer than the abandoned-copy expiry; "
                        + "its capacity is free again", "volume", name, "received_bytes", record.getReceivedBytes(),
                "capacity_bytes", record.getCapacityBytes(), "idle_seconds", idle.toSeconds(), "expiry_seconds", expiry.toSeconds());
        return true;
    }

    /** The RECEIVING record made READY, as {@link IncomingCopies#finish} says, and written. */
    ImageRecord ready(String name, long sourceBytes, String filesystem, boolean usedAsBlock, boolean encrypted) throws IOException {
        ImageRecord record = receiving(name);
        record = record.toBuilder()
                .setState(ImageRecord.State.READY)
                .clearReceiveProgressTime()
                .clearReceiveZeroesGaps()
                .setFilesystem(filesystem)
                .setUsedAsBlock(usedAsBlock)
                .setEncrypted(encrypted)
                .setGrowFilesystem(!filesystem.isEmpty() && sourceBytes < record.getCapacityBytes())
                .build();
        records.write(record);
        log.info("volume received", "volume", name, "bytes", record.getCapacityBytes());
        return record;
    }
}
