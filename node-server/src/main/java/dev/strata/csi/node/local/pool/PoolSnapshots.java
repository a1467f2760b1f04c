package dev.strata.csi.node.local.pool;

import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.VolumeGroup;
import dev.strata.csi.backend.local.records.GroupMember;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.backend.local.records.SnapshotRecord;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.ImageFiles;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The pool's snapshots, in its snapshot area ({@link PoolSnapshotStore}): each a copy of an image
 * taken consistent ({@link ConsistentCopy}), independent of the image once made. Every step is
 * recorded before it acts, as the images' are: a snapshot is CREATING until its copy is complete,
 * READY then, DELETING on its way out; a crash leaves a state the retried call, or
 * {@link #reconcile()} at the next start, completes or undoes. Its bytes are admitted against the
 * pool's room ({@link PoolCapacity}) and counted in it from its record on. Callers lock a
 * snapshot's name ({@link #lockKey}) as they lock an image's, and take a snapshot with its source
 * image's lock held.
 */
public final class PoolSnapshots implements VolumeSnapshots {

    private final PoolSnapshotStore store;
    private final RecordStore images;
    private final PoolCapacity capacity;
    private final ConsistentCopy copies;
    private final ImageFiles files;
    private final Crashes<CrashPoint> crashes;
    /** When a snapshot is taken, as its record keeps it. */
    private final Clock clock;
    private final Log log;

    PoolSnapshots(PoolSnapshotStore store, RecordStore images, PoolCapacity capacity, ConsistentCopy copies, ImageFiles files,
            Crashes<CrashPoint> crashes, Clock clock, Log log) {
        this.store = store;
        this.images = images;
        this.capacity = capacity;
        this.copies = copies;
        this.files = files;
        this.crashes = crashes;
        this.clock = clock;
        this.log = log;
    }

    /**
     * Takes a snapshot of image {@code sourceImage} under {@code name}, or returns the snapshot
     * when it exists of the same image (another image's: ALREADY_EXISTS). The record comes first
     * (CREATING), the copy then, READY last: a snapshot is listed only once complete, and a partial
     * one is removed by the retry or at the next start. A {@code temporary} snapshot, taken for a
     * copy to another node, is left out of {@link #list()} and removed at the next start.
     */
    @Override
    public Pending prepare(String name, String sourceImage, boolean temporary, List<String> copyNodes,
            Optional<Membership> member)
            throws IOException, DeviceException, MountException {
        LocalSnapshotId.checkName(name);
        Optional<SnapshotRecord> existing = store.read(name);
        if (existing.isPresent()) {
            SnapshotRecord record = existing.get();
            switch (record.getState()) {
                case READY -> {
                    PoolSnapshotStore.requireSame(record, sourceImage, member.map(m -> m.group().getName()).orElse(""));
                    return Existing.of(record);
                }
                case RECEIVING -> throw SnapshotCopies.beingReceived(record);
                default -> finishDelete(record); // CREATING: a partial copy; DELETING: on its way out
            }
        }
        ImageRecord source = images.ready(sourceImage);
        SnapshotRecord.Builder builder = SnapshotRecord.newBuilder();
        member.ifPresent(m -> builder.setGroup(m.group()));
        SnapshotRecord wanted = builder
                .setName(name)
                .setTemporary(temporary)
                .addAllCopyNodes(copyNodes)
                .setSourceVolume(sourceImage)
                .setCapacityBytes(source.getCapacityBytes())
                .setState(SnapshotRecord.State.CREATING)
                .setCreationTime(member.map(Membership::cut).orElseGet(() -> ImagePool.timestamp(clock.instant())))
                .setFilesystem(source.getFilesystem())
                .setUsedAsBlock(source.getUsedAsBlock())
                .setEncrypted(source.getEncrypted())
                .setCopyBytes(files.allocatedBytes(images.imagePath(sourceImage)))
                .build();
        // From the record on, it reserves the copy's bytes.
        SnapshotRecord record = capacity.admit("a snapshot of volume " + sourceImage, wanted.getCopyBytes(), 0, () -> store.write(wanted));
        crashes.reach(CrashPoint.SNAPSHOT_RECORDED);
        return new Pending() {
            private ImageFiles.CopyMethod copied;

            @Override
            public boolean fresh() {
                return true;
            }

            @Override
            public void copy() throws IOException, DeviceException, MountException {
                copied = copies.copy(ConsistentCopy.Content.ofImage(source, images.imagePath(sourceImage)), path(name));
            }

            @Override
            public Snapshot finish() throws IOException {
                crashes.reach(CrashPoint.SNAPSHOT_COPIED);
                files.sync(path(name)); // after the copy's thaw: a group's window holds no fsync
                SnapshotRecord ready = store.write(record.toBuilder()
                        .setState(SnapshotRecord.State.READY)
                        .setReflinked(copied == ImageFiles.CopyMethod.REFLINK)
                        .setCopyBytes(0)
                        .build());
                log.info("snapshot taken", "snapshot", name, "volume", sourceImage, "how", copied, "bytes", source.getCapacityBytes());
                return snapshot(ready);
            }
        };
    }

    /** A snapshot there already: nothing to copy or record. */
    record Existing(Snapshot snapshot) implements Pending {
        static Existing of(SnapshotRecord record) {
            return new Existing(PoolSnapshots.snapshot(record));
        }

        @Override
        public boolean fresh() {
            return false;
        }

        @Override
        public void copy() {}

        @Override
        public Snapshot finish() {
            return snapshot;
        }
    }

    /** The READY snapshot {@code name}, for a restore or a transfer to read; NOT_FOUND when there is none. */
    @Override
    public SnapshotRecord ready(String name) throws IOException {
        return store.ready(name);
    }

    /** What a copy to another node calls the snapshot's content: taken once, it never changes. */
    public static String contentTag(SnapshotRecord record) {
        var taken = record.getCreationTime();
        return "snapshot/" + record.getName() + "/" + taken.getSeconds() + "." + taken.getNanos();
    }

    /** The file of snapshot {@code name}. */
    public Path path(String name) {
        return store.imagePath(name);
    }

    /** Deletes the snapshot; succeeds when already gone. The image it was taken of is not involved. */
    @Override
    public void delete(String name) throws IOException {
        Optional<SnapshotRecord> record = store.read(name);
        if (record.isEmpty()) {
            return;
        }
        SnapshotRecord deleting = store.write(record.get().toBuilder().setState(SnapshotRecord.State.DELETING).build());
        crashes.reach(CrashPoint.SNAPSHOT_DELETE_RECORDED);
        finishDelete(deleting);
        log.info("snapshot deleted", "snapshot", name);
    }

    @Override
    public List<Snapshot> commit(String group) throws IOException {
        return store.commit(group).stream().map(PoolSnapshots::snapshot).toList();
    }

    /** The pool's complete snapshots, but the temporary ones of copies to other nodes. */
    @Override
    public List<Snapshot> list() throws IOException {
        List<Snapshot> ready = new ArrayList<>();
        for (SnapshotRecord record : store.all()) {
            if (listed(record)) {
                ready.add(snapshot(record));
            }
        }
        return ready;
    }

    /** Snapshot {@code name} when {@link #list} would list it. */
    @Override
    public Optional<Snapshot> listed(String name) throws IOException {
        return store.read(name).filter(PoolSnapshots::listed).map(PoolSnapshots::snapshot);
    }

    @Override
    public boolean holds(String name) throws IOException {
        return store.read(name).isPresent();
    }

    /** Whether a snapshot of this record is listed: complete, and not a copy's temporary one. */
    static boolean listed(SnapshotRecord record) {
        return record.getState() == SnapshotRecord.State.READY && !record.getTemporary();
    }

    /** The lock key of a snapshot's name: apart from every image's, whose names hold no '/'. */
    public static String lockKey(String name) {
        return "snapshot/" + name;
    }

    /** Removes temporary files a crash left mid-write of a record; returns how many. */
    int removeTemporaries() throws IOException {
        return store.removeTemporaries();
    }

    /**
     * At start: finishes what a crash interrupted (a partial copy is removed, a delete completed)
     * and removes the temporary snapshots of copies to other nodes.
     */
    void reconcile() throws IOException {
        for (SnapshotRecord record : store.all()) {
            if (record.getState() == SnapshotRecord.State.RECEIVING) {
                log.info("snapshot copy partly received from another node; the retried copy resumes it", "snapshot", record.getName(),
                        "origin", record.getOriginNode(), "received_bytes", record.getReceivedBytes());
            } else if (record.getState() != SnapshotRecord.State.READY) {
                finishDelete(record);
                log.info(record.getState() == SnapshotRecord.State.CREATING ? "removed interrupted snapshot" : "finished interrupted snapshot delete",
                        "snapshot", record.getName());
            } else if (record.getTemporary()) { // its copy to another node broke off with the restart; a retry takes another
                finishDelete(record);
                log.info("removed temporary snapshot of a copy to another node", "snapshot", record.getName());
            } else if (PoolSnapshotStore.uncommitted(record)) { // its group's cut broke off with the restart; a retry cuts again
                finishDelete(record);
                log.info("removed a member of a group snapshot never committed", "snapshot", record.getName(), "group",
                        record.getGroup().getName());
            }
        }
    }

    /** Removes the snapshot's file, then its record: a partial copy's, or a deleted snapshot's. */
    private void finishDelete(SnapshotRecord record) throws IOException {
        Files.deleteIfExists(store.imagePath(record.getName()));
        crashes.reach(CrashPoint.SNAPSHOT_DELETE_UNLINKED);
        store.delete(record.getName());
    }

    /** The agent API's snapshot of a record. */
    public static Snapshot snapshot(SnapshotRecord record) {
        Snapshot.Builder snapshot = Snapshot.newBuilder()
                .setName(record.getName())
                .setSourceVolume(record.getSourceVolume())
                .setCapacityBytes(record.getCapacityBytes())
                .setCreationTime(record.getCreationTime())
                .addAllCopyNodes(record.getCopyNodesList())
                .setOriginNode(record.getOriginNode());
        if (record.hasGroup()) {
            VolumeGroup.Builder group = snapshot.getGroupBuilder()
                    .setName(record.getGroup().getName())
                    .setCreationTime(record.getCreationTime())
                    .setCommitted(record.getGroup().getCommitted());
            for (GroupMember member : record.getGroup().getMembersList()) {
                group.addMembersBuilder().setNodeId(member.getNodeId()).setVolume(member.getVolume()).setSnapshot(member.getSnapshot());
            }
        }
        return snapshot.build();
    }
}
