package dev.strata.csi.node.local.pool;

import com.google.protobuf.Timestamp;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.Source;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;

/**
 * A pool's side of the copies it receives from other nodes (ReceiveVolume, WriteContent), the same
 * for every pool but for its storage ({@link ReceivingStorage}): a volume made in the state
 * RECEIVING, its content written in order with its progress recorded, so that a stream cut short
 * resumes where it got to, then checked and READY. Every step writes the record before it acts,
 * as the pool's own calls do, and every RECEIVING record is written with the time of its step, so
 * that a copy nobody comes back for can be told apart and removed ({@link #removeIfAbandoned});
 * the pool's {@code reconcile()} leaves a RECEIVING volume for its retried copy. Callers hold the
 * volume's lock.
 */
public final class IncomingCopies {

    private final RecordStore records;
    private final ReceivingStorage storage;
    private final Clock clock;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    IncomingCopies(RecordStore records, ReceivingStorage storage, Clock clock, Crashes<CrashPoint> crashes, Log log) {
        this.records = records;
        this.storage = storage;
        this.clock = clock;
        this.crashes = crashes;
        this.log = log;
    }

    /**
     * The volume {@code name} that is to receive content from another node ({@code source}: what
     * that node calls it): made empty in the state RECEIVING, its capacity reserved as a create's,
     * or the one an earlier attempt left, with how far it got; a READY one is returned as it is.
     * ALREADY_EXISTS when the name is taken with another size, allocation or type, source or encryption;
     * INVALID_ARGUMENT for what the pool does not make.
     */
    public ImageRecord receive(String name, long capacityBytes, Allocation allocation, LvType lvType, ContentSource source,
            boolean encrypted, double overcommitRatio) throws IOException, DeviceException, MountException {
        LocalVolumeId.checkName(name);
        Source from = ImagePool.recorded(source);
        ImageRecord wanted = storage.plan(ImageRecord.newBuilder()
                .setName(name)
                .setCapacityBytes(capacityBytes)
                .setAllocation(ImagePool.recorded(allocation))
                .setLvType(LvmPool.recorded(lvType))
                .setState(ImageRecord.State.CREATING)
                .setSource(from)
                .setEncrypted(encrypted), overcommitRatio);
        Optional<ImageRecord> existing = records.read(name);
        if (existing.isPresent() && (existing.get().getState() == ImageRecord.State.READY
                || existing.get().getState() == ImageRecord.State.RECEIVING)) {
            ImageRecord record = existing.get();
            requireSame(record, wanted);
            return record.getState() == ImageRecord.State.RECEIVING ? progressed(record.toBuilder()) : record; // back for it: not abandoned
        }
        storage.clear(name, existing); // CREATING holds no data; DELETING is finished
        storage.reserve(wanted);
        crashes.reach(CrashPoint.CREATE_RECORDED);
        storage.create(wanted);
        crashes.reach(CrashPoint.CREATE_ALLOCATED);
        ImageRecord record = progressed(wanted.toBuilder());
        log.info("volume created to receive content", "volume", name, "pool", storage.kind(), "bytes", capacityBytes,
                "allocation", allocation, "lv_type", lvType, "zeroes_gaps", record.getReceiveZeroesGaps());
        return record;
    }

    private static void requireSame(ImageRecord record, ImageRecord wanted) {
        if (record.getCapacityBytes() != wanted.getCapacityBytes() || record.getAllocation() != wanted.getAllocation()
                || record.getLvType() != wanted.getLvType()
                || !record.getSource().equals(wanted.getSource()) || record.getEncrypted() != wanted.getEncrypted()) {
            Optional<Source> has = record.hasSource() ? Optional.of(record.getSource()) : Optional.empty();
            throw CsiException.alreadyExists("volume " + record.getName() + " exists with " + record.getCapacityBytes() + " bytes, "
                    + record.getAllocation() + ", " + record.getLvType() + ", " + ImagePool.describe(has) + (record.getEncrypted() ? ", encrypted" : "")
                    + "; asked for " + wanted.getCapacityBytes() + " bytes, " + wanted.getAllocation() + ", " + wanted.getLvType() + ", "
                    + ImagePool.describe(Optional.of(wanted.getSource())) + " of another node" + (wanted.getEncrypted() ? ", encrypted" : ""));
        }
    }

    /** The RECEIVING volume {@code name} as a stream writes it. */
    public Receiving target(String name) {
        return new Receiving() {
            @Override
            public Progress progress() throws IOException {
                return IncomingCopies.progress(receiving(name));
            }

            @Override
            public Progress restart(String tag) throws IOException, DeviceException {
                return IncomingCopies.progress(IncomingCopies.this.restart(name, tag));
            }

            @Override
            public void receivedUpTo(long receivedBytes) throws IOException {
                IncomingCopies.this.receivedUpTo(name, receivedBytes);
            }

            @Override
            public IncomingContent open() throws IOException, DeviceException {
                return IncomingCopies.this.open(name);
            }

            @Override
            public void remove() throws IOException, DeviceException, MountException {
                storage.delete(name);
            }
        };
    }

    private static Receiving.Progress progress(ImageRecord record) {
        return new Receiving.Progress(record.getCapacityBytes(), true, record.getEncrypted(), record.getReceiveTag(), record.getReceivedBytes(), "");
    }

    /** The RECEIVING volume, for a transfer's next step; FAILED_PRECONDITION when it is not being received. */
    public ImageRecord receiving(String name) throws IOException {
        return records.read(name)
                .filter(record -> record.getState() == ImageRecord.State.RECEIVING)
                .orElseThrow(() -> CsiException.failedPrecondition("volume " + name + " is not being received on this node"));
    }

    /**
     * Starts the RECEIVING volume over, empty, for the content {@code tag} names (another content
     * than it had): emptied before the record names the new content, so a crash in between leaves
     * the old tag, which a start of the new content empties again (and a resume of the old one
     * fails its digest, DATA_LOSS, and starts over).
     */
    public ImageRecord restart(String name, String tag) throws IOException, DeviceException {
        storage.empty(receiving(name));
        return progressed(receiving(name).toBuilder().setReceiveTag(tag).setReceivedBytes(0));
    }

    /** Records that everything below {@code receivedBytes} of the RECEIVING volume's content is on disk, synced. */
    public void receivedUpTo(String name, long receivedBytes) throws IOException {
        progressed(receiving(name).toBuilder().setReceivedBytes(receivedBytes));
    }

    /** The RECEIVING volume's storage, open for writing until closed. */
    public IncomingContent open(String name) throws IOException, DeviceException {
        return storage.open(receiving(name));
    }

    /**
     * The RECEIVING volume is complete, synced and checked: READY from now on, holding the
     * {@code filesystem} its source's record named (or raw block content), never to be formatted,
     * and encrypted when its source is; a filesystem from a smaller source grows at the next stage.
     */
    public Volume finish(String name, long sourceBytes, String filesystem, boolean usedAsBlock, boolean encrypted) throws IOException {
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
        log.info("volume received", "volume", name, "pool", storage.kind(), "bytes", record.getCapacityBytes());
        return storage.image(record); // never attached while receiving
    }

    /** The RECEIVING volumes, by name: the candidates for {@link #removeIfAbandoned}. */
    public List<String> names() throws IOException {
        return records.all().stream().filter(record -> record.getState() == ImageRecord.State.RECEIVING).map(ImageRecord::getName).toList();
    }

    /**
     * Removes the RECEIVING volume {@code name}, as a delete does, when no transfer step has touched
     * it for {@code expiry}: a copy nobody comes back for (its volume's PVC was deleted while
     * external-provisioner retried, and the provisioner restarted and forgot it), whose storage and
     * reserved capacity would stay forever. The caller holds the volume's lock, as every transfer
     * step does: a step either came first, and the volume is kept, or finds it gone. Returns
     * whether it was removed.
     */
    public boolean removeIfAbandoned(String name, Duration expiry) throws IOException, DeviceException, MountException {
        Optional<ImageRecord> found = records.read(name).filter(record -> record.getState() == ImageRecord.State.RECEIVING);
        if (found.isEmpty()) {
            return false;
        }
        ImageRecord record = found.get();
        Duration idle = idle(record.getReceiveProgressTime(), clock);
        if (idle.compareTo(expiry) < 0) {
            return false;
        }
        storage.delete(name);
        log.warn("removed partly received volume: no transfer step for longer than the abandoned-copy expiry; "
                        + "its capacity is free again", "volume", name, "received_bytes", record.getReceivedBytes(),
                "capacity_bytes", record.getCapacityBytes(), "idle_seconds", idle.toSeconds(), "expiry_seconds", expiry.toSeconds());
        return true;
    }

    /** How long since {@code progress}, the time a RECEIVING record says a transfer step last touched it. */
    static Duration idle(Timestamp progress, Clock clock) {
        return Duration.between(Instant.ofEpochSecond(progress.getSeconds(), progress.getNanos()), clock.instant());
    }

    /** Writes the RECEIVING record with the time of this transfer step: the volume is not abandoned. */
    private ImageRecord progressed(ImageRecord.Builder record) throws IOException {
        ImageRecord written = record.setState(ImageRecord.State.RECEIVING).setReceiveProgressTime(ImagePool.timestamp(clock.instant())).build();
        records.write(written);
        return written;
    }
}
