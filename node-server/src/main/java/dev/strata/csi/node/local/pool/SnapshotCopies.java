package dev.strata.csi.node.local.pool;

import com.google.protobuf.Timestamp;
import dev.strata.csi.agent.api.ContentStart;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * A pool's copies of other nodes' snapshots (ReceiveSnapshotCopy, WriteSnapshotCopy), kept in its
 * snapshot area beside its own snapshots ({@link PoolSnapshotStore}) under the name the snapshot
 * has on the node that took it, with that node as its origin. A copy is RECEIVING (never listed,
 * never a content source) from its first record until its whole content is written, synced and
 * its digest matches the sender's; READY then, and from there on a snapshot like the pool's own:
 * listed, restored from, read by ReadContent, its ranges told, deleted by DeleteSnapshot.
 *
 * <p>A copy is built empty, or on this pool's complete copy of an earlier snapshot of the same
 * volume (its base): it starts as the base's content (a reflink or a thin snapshot of it where the
 * storage can) and its stream holds only what changed. Every step writes the record first; a
 * RECEIVING copy keeps its progress over restarts, so that the retried stream resumes, and one no
 * step touched for the abandoned-copy expiry is removed ({@link #removeIfAbandoned}), as a
 * RECEIVING volume is. Callers hold the snapshot's lock ({@link PoolSnapshots#lockKey}).
 */
public final class SnapshotCopies {

    /** What a pool keeps a copy in: the steps that differ between an image file and a thin logical volume. */
    interface Storage {

        PoolKind kind();

        /** Writes the copy's first record once the pool has room for it; RESOURCE_EXHAUSTED otherwise. */
        void reserve(SnapshotRecord record) throws IOException, DeviceException, MountException;

        /**
         * Makes the copy's storage, replacing what a crash left of it: empty, or on {@code base} (the
         * base copy's record) its content; returns whether it shares the base's blocks (a reflink).
         */
        boolean create(SnapshotRecord record, Optional<SnapshotRecord> base) throws IOException, DeviceException;

        /** The storage, open for one stream. */
        IncomingContent open(SnapshotRecord record) throws IOException, DeviceException;

        /** Removes the copy's storage; succeeds when there is none. */
        void remove(SnapshotRecord record) throws IOException, DeviceException, MountException;
    }

    private final PoolSnapshotStore store;
    private final Storage storage;
    private final Clock clock;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    SnapshotCopies(PoolSnapshotStore store, Storage storage, Clock clock, Crashes<CrashPoint> crashes, Log log) {
        this.store = store;
        this.storage = storage;
        this.clock = clock;
        this.crashes = crashes;
        this.log = log;
    }

    /**
     * The copy {@code name} of {@code snapshot} as {@code originNode} reports it: made RECEIVING,
     * built on {@code base} when this pool holds a complete copy of it from the same node (else
     * empty, and the whole content is to be sent), or the copy an earlier attempt made, with its
     * base and progress (touched: it is not abandoned), or the complete copy. A copy on a base
     * starts as a copy of the base's storage, made here: instant where the pool reflinks or takes
     * thin snapshots, as long as the base's data takes to copy elsewhere (an ext4 image pool), in
     * which case the call outlives its caller's deadline and the retries find the name busy
     * (ABORTED) until it is done. ALREADY_EXISTS when
     * the name is this node's own snapshot's, or another origin's or another volume's copy;
     * INVALID_ARGUMENT for a base of another volume, or not taken before the snapshot.
     */
    public SnapshotRecord receive(String name, String originNode, Snapshot snapshot, String base)
            throws IOException, DeviceException, MountException {
        LocalSnapshotId.checkName(name);
        if (!base.isEmpty()) {
            LocalSnapshotId.checkName(base);
        }
        Optional<SnapshotRecord> existing = store.read(name);
        if (existing.isPresent()) {
            SnapshotRecord record = existing.get();
            switch (record.getState()) {
                case READY, RECEIVING -> {
                    requireSame(record, originNode, snapshot);
                    return record.getState() == SnapshotRecord.State.READY ? record : progressed(record.toBuilder());
                }
                case DELETING -> finishDelete(record);
                default -> throw CsiException.alreadyExists("snapshot " + name + " is being taken on this node; it is not a copy of "
                        + originNode + "'s");
            }
        }
        Optional<SnapshotRecord> built = base(base, originNode, snapshot);
        SnapshotRecord wanted = SnapshotRecord.newBuilder()
                .setName(name)
                .setSourceVolume(snapshot.getSourceVolume())
                .setCapacityBytes(snapshot.getCapacityBytes())
                .setCreationTime(snapshot.getCreationTime())
                .addAllCopyNodes(snapshot.getCopyNodesList())
                .setOriginNode(originNode)
                .setBaseSnapshot(built.map(SnapshotRecord::getName).orElse(""))
                .setCopyBytes(snapshot.getCapacityBytes()) // reserved: the whole content may arrive
                .setState(SnapshotRecord.State.RECEIVING)
                .setReceiveProgressTime(ImagePool.timestamp(clock.instant()))
                .build();
        storage.reserve(wanted);
        crashes.reach(CrashPoint.SNAPSHOT_COPY_RECORDED);
        boolean shared = storage.create(wanted, built);
        SnapshotRecord record = progressed(wanted.toBuilder().setReflinked(shared));
        log.info("snapshot copy created to receive content", "snapshot", name, "origin", originNode, "volume", snapshot.getSourceVolume(),
                "pool", storage.kind(), "bytes", snapshot.getCapacityBytes(), "base", record.getBaseSnapshot());
        return record;
    }

    /** ALREADY_EXISTS for a take of a snapshot whose name a copy being received has. */
    static CsiException beingReceived(SnapshotRecord record) {
        return CsiException.alreadyExists("snapshot " + record.getName() + " is a copy of node " + record.getOriginNode()
                + "'s being received");
    }

    /** The complete copy {@code base} from the same node of an earlier snapshot of the same volume; empty when there is none. */
    private Optional<SnapshotRecord> base(String base, String originNode, Snapshot snapshot) throws IOException {
        if (base.isEmpty()) {
            return Optional.empty();
        }
        Optional<SnapshotRecord> found = store.read(base)
                .filter(record -> record.getState() == SnapshotRecord.State.READY && record.getOriginNode().equals(originNode));
        if (found.isEmpty()) {
            return found;
        }
        SnapshotRecord record = found.get();
        if (!record.getSourceVolume().equals(snapshot.getSourceVolume())) {
            throw CsiException.invalidArgument("base snapshot " + base + " is of volume " + record.getSourceVolume() + ", not of "
                    + snapshot.getSourceVolume());
        }
        if (base.equals(snapshot.getName()) || later(record.getCreationTime(), snapshot.getCreationTime())) {
            throw CsiException.invalidArgument("base snapshot " + base + " was not taken before snapshot " + snapshot.getName());
        }
        return found;
    }

    private static boolean later(Timestamp a, Timestamp b) {
        return a.getSeconds() > b.getSeconds() || a.getSeconds() == b.getSeconds() && a.getNanos() > b.getNanos();
    }

    private static void requireSame(SnapshotRecord record, String originNode, Snapshot snapshot) {
        if (!record.getOriginNode().equals(originNode) || !record.getSourceVolume().equals(snapshot.getSourceVolume())
                || !record.getCreationTime().equals(snapshot.getCreationTime())) {
            throw CsiException.alreadyExists("snapshot " + record.getName() + (record.getOriginNode().isEmpty() ? " is this node's own"
                    : " is a copy of " + record.getOriginNode() + "'s snapshot of volume " + record.getSourceVolume())
                    + "; asked for a copy of " + originNode + "'s snapshot of volume " + snapshot.getSourceVolume());
        }
    }

    /** The RECEIVING copy {@code name} as a stream writes it. */
    public Receiving target(String name) {
        return new Receiving() {
            @Override
            public Progress progress() throws IOException {
                return SnapshotCopies.progress(receiving(name));
            }

            @Override
            public Progress restart(String tag) throws IOException, DeviceException {
                SnapshotRecord record = receiving(name);
                Optional<SnapshotRecord> base = record.getBaseSnapshot().isEmpty() ? Optional.empty() : Optional.of(store.ready(record.getBaseSnapshot()));
                boolean shared = storage.create(record, base);
                return SnapshotCopies.progress(progressed(receiving(name).toBuilder().setReceiveTag(tag).setReceivedBytes(0).setReflinked(shared)));
            }

            @Override
            public void receivedUpTo(long receivedBytes) throws IOException {
                progressed(receiving(name).toBuilder().setReceivedBytes(receivedBytes));
            }

            @Override
            public IncomingContent open() throws IOException, DeviceException {
                return storage.open(receiving(name));
            }

            @Override
            public void remove() throws IOException, DeviceException, MountException {
                Optional<SnapshotRecord> record = store.read(name);
                if (record.isPresent()) {
                    finishDelete(record.get());
                }
            }
        };
    }

    private static Receiving.Progress progress(SnapshotRecord record) {
        return new Receiving.Progress(record.getCapacityBytes(), false, false, record.getReceiveTag(), record.getReceivedBytes(),
                record.getBaseSnapshot());
    }

    /** The RECEIVING copy; FAILED_PRECONDITION when there is none. */
    private SnapshotRecord receiving(String name) throws IOException {
        return store.read(name)
                .filter(record -> record.getState() == SnapshotRecord.State.RECEIVING)
                .orElseThrow(() -> CsiException.failedPrecondition("snapshot copy " + name + " is not being received on this node"));
    }

    /**
     * The RECEIVING copy's whole content is written, synced and verified: READY, holding the
     * filesystem (or block content) and encryption its stream's {@code start} names, listed from now on.
     */
    public Snapshot finish(String name, ContentStart start) throws IOException {
        SnapshotRecord ready = store.write(receiving(name).toBuilder()
                .setState(SnapshotRecord.State.READY)
                .clearReceiveProgressTime()
                .setCopyBytes(0)
                .setFilesystem(start.getFilesystem())
                .setUsedAsBlock(start.getUsedAsBlock())
                .setEncrypted(start.getEncrypted())
                .build());
        crashes.reach(CrashPoint.SNAPSHOT_COPY_COMMITTED);
        log.info("snapshot copy complete", "snapshot", name, "origin", ready.getOriginNode(), "volume", ready.getSourceVolume(),
                "pool", storage.kind(), "base", ready.getBaseSnapshot());
        return PoolSnapshots.snapshot(ready);
    }

    /** The RECEIVING copies, by name: the candidates for {@link #removeIfAbandoned}. */
    public List<String> names() throws IOException {
        return store.all().stream().filter(record -> record.getState() == SnapshotRecord.State.RECEIVING).map(SnapshotRecord::getName).toList();
    }

    /**
     * Removes the RECEIVING copy {@code name} when no transfer step has touched it for
     * {@code expiry}: its snapshot was deleted, or the controller chose another node, while it was
     * being sent. Returns whether it was removed.
     */
    public boolean removeIfAbandoned(String name, Duration expiry) throws IOException, DeviceException, MountException {
        Optional<SnapshotRecord> found = store.read(name).filter(record -> record.getState() == SnapshotRecord.State.RECEIVING);
        if (found.isEmpty()) {
            return false;
        }
        SnapshotRecord record = found.get();
        Duration idle = IncomingCopies.idle(record.getReceiveProgressTime(), clock);
        if (idle.compareTo(expiry) < 0) {
            return false;
        }
        finishDelete(record);
        log.warn("removed partly received snapshot copy: no transfer step for longer than the abandoned-copy expiry",
                "snapshot", name, "origin", record.getOriginNode(), "received_bytes", record.getReceivedBytes(),
                "idle_seconds", idle.toSeconds(), "expiry_seconds", expiry.toSeconds());
        return true;
    }

    /** Marks it DELETING, removes its storage, then its record. */
    private void finishDelete(SnapshotRecord record) throws IOException, DeviceException, MountException {
        SnapshotRecord deleting = record.getState() == SnapshotRecord.State.DELETING ? record
                : store.write(record.toBuilder().setState(SnapshotRecord.State.DELETING).build());
        storage.remove(deleting);
        store.delete(deleting.getName());
    }

    /** Writes the RECEIVING record with the time of this transfer step: the copy is not abandoned. */
    private SnapshotRecord progressed(SnapshotRecord.Builder record) throws IOException {
        return store.write(record.setState(SnapshotRecord.State.RECEIVING).setReceiveProgressTime(ImagePool.timestamp(clock.instant())).build());
    }
}
