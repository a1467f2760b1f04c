package dev.strata.csi.node.local;

import dev.strata.csi.system.Crashes;

/**
 * The places between two system steps of a multi-step local-volume operation where a crash leaves
 * something half done: the record written but the file not made, the filesystem made but not
 * recorded, the device detached but the image not removed... Each is a test's way in: with
 * {@link Crashes} armed at one of them, node-server dies there, and the test checks that the
 * retried call, or the next start, completes or undoes the operation. The name says the operation
 * and the step just done.
 */
public enum CrashPoint {
    CREATE_RECORDED,
    CREATE_ALLOCATED,
    DELETE_RECORDED,
    DELETE_DETACHED,
    DELETE_UNLINKED,
    ATTACH_RECORDED,
    ATTACH_ATTACHED,
    DETACH_RECORDED,
    DETACH_DETACHED,
    EXPAND_RECORDED,
    EXPAND_GROWN,
    NODE_EXPAND_GROWN,
    SNAPSHOT_RECORDED,
    /** A filesystem frozen for a copy (a snapshot's or a clone's): the next start must thaw it. */
    FROZEN,
    SNAPSHOT_COPIED,
    SNAPSHOT_DELETE_RECORDED,
    SNAPSHOT_DELETE_UNLINKED,
    RESTORE_RECORDED,
    RESTORE_COPIED,
    /** An encrypted volume's LUKS2 header written, not yet opened (reached only where the kernel has dm-crypt). */
    STAGE_ENCRYPTION_FORMATTED,
    STAGE_ENCRYPTION_OPENED,
    STAGE_FORMATTED,
    STAGE_RECORDED,
    STAGE_MOUNTED,
    UNSTAGE_UNMOUNTED,
    UNSTAGE_ENCRYPTION_CLOSED,
    /**
     * A passphrase rotation (at a stage, expansion or publish whose secret has a previousPassphrase):
     * the new passphrase added to the header, the previous one's slot not yet removed; then removed.
     */
    ROTATE_ENCRYPTION_KEY_ADDED,
    ROTATE_ENCRYPTION_OLD_KEY_REMOVED,
    PUBLISH_TARGET_MADE,
    PUBLISH_MOUNTED,
    UNPUBLISH_UNMOUNTED,
    // A transfer to another node (restore or clone there). The sending node, mid-stream:
    TRANSFER_SENT,
    // The receiving node: data written but not yet recorded as on disk; its progress recorded
    // (the retry resumes there); the whole content synced and its digest checked, not yet READY.
    TRANSFER_WRITTEN,
    TRANSFER_CHECKPOINTED,
    TRANSFER_VERIFIED,
    // A snapshot copy received from another node (ReceiveSnapshotCopy, WriteSnapshotCopy): its
    // record written (RECEIVING), its storage not yet made; its whole content written and synced,
    // its digest not yet checked; verified and recorded complete, not yet answered.
    SNAPSHOT_COPY_RECORDED,
    SNAPSHOT_COPY_WRITTEN,
    SNAPSHOT_COPY_COMMITTED,
    // A group snapshot's cut (CutVolumeGroup, CommitVolumeGroup): this node's filesystems of the
    // group frozen; one member taken, the filesystems still frozen; all taken and thawed, not yet
    // answered; the node's members committed, not yet answered.
    GROUP_FROZEN,
    GROUP_MEMBER_TAKEN,
    GROUP_THAWED,
    GROUP_COMMITTED;
}
