package dev.strata.csi.deploy;

import dev.strata.csi.node.local.CrashPoint;

/**
 * Which of node-server's crash points each crash suite arms: the one place the suites
 * (system-tests) and DocsTest's figures of them take it from. Apart from {@link CrashPoint}, which
 * only names the places node-server can be stopped at.
 */
public final class CrashPoints {

    private CrashPoints() {}

    /** Reached only in a transfer between two nodes, which the one-node scenarios do not make (TransferCrashTest's). */
    public static boolean transfer(CrashPoint point) {
        return point.name().startsWith("TRANSFER_");
    }

    /** Reached only in a snapshot copy received from another node (SnapshotCopyCrashTest's). */
    public static boolean snapshotCopy(CrashPoint point) {
        return point.name().startsWith("SNAPSHOT_COPY_");
    }

    /** Reached only with an encrypted volume, where the kernel has dm-crypt (EncryptionTest's and EncryptedLvmTest's; hack/luks-vm.sh runs them). */
    public static boolean encryption(CrashPoint point) {
        return point.name().contains("_ENCRYPTION_");
    }

    /** Reached only in a group snapshot's cut (GroupSnapshotCrashTest's). */
    public static boolean group(CrashPoint point) {
        return point.name().startsWith("GROUP_");
    }

    /** Of encryption, reached only in a passphrase rotation (EncryptedLvmTest's), not by every encrypted volume's stage and unstage. */
    public static boolean rotation(CrashPoint point) {
        return point.name().startsWith("ROTATE_");
    }

    /** A point of one node: not of a copy between nodes (of a volume or a snapshot), of encryption or of a group's cut (CrashRecoveryTest's). */
    public static boolean oneNode(CrashPoint point) {
        return !transfer(point) && !snapshotCopy(point) && !encryption(point) && !group(point);
    }

    /**
     * A step of the LVM pool itself (create, delete, attach, detach, expand, snapshot, restore):
     * not staging, publishing or a copy between nodes, and not FROZEN, as LVM suspends the origin
     * of a snapshot itself (LvmCrashRecoveryTest's).
     */
    public static boolean lvmPool(CrashPoint point) {
        return !transfer(point) && !snapshotCopy(point) && !encryption(point) && !group(point) && !point.name().startsWith("STAGE") && !point.name().startsWith("UNSTAGE")
                && !point.name().contains("PUBLISH") && point != CrashPoint.NODE_EXPAND_GROWN && point != CrashPoint.FROZEN;
    }
}
