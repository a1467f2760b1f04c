package dev.strata.csi.controller.nfs;

import jnr.ffi.Runtime;
import jnr.ffi.Struct;

/**
 * {@code struct if_dqblk} of linux/quota.h, the argument of quotactl's Q_SETQUOTA (72 bytes: eight
 * 64-bit fields, the 32-bit valid mask and 4 bytes of tail padding), which is also
 * {@code struct if_nextdqblk} of Q_GETNEXTQUOTA: the same with the id the kernel found in that tail.
 * Block limits count 1 KiB blocks, usage bytes.
 */
final class QuotaBlock extends Struct {

    static final int SIZE = 72;
    /** QIF_BLIMITS in {@link #valid}: the block limits are set. */
    static final int BLOCK_LIMITS = 1;

    final Unsigned64 blockHardLimit = new Unsigned64();
    final Unsigned64 blockSoftLimit = new Unsigned64();
    final Unsigned64 currentSpace = new Unsigned64();
    final Unsigned64 inodeHardLimit = new Unsigned64();
    final Unsigned64 inodeSoftLimit = new Unsigned64();
    final Unsigned64 currentInodes = new Unsigned64();
    final Unsigned64 blockGraceTime = new Unsigned64();
    final Unsigned64 inodeGraceTime = new Unsigned64();
    final Unsigned32 valid = new Unsigned32();
    /** Only in if_nextdqblk: the id whose quota the kernel returned. */
    final Unsigned32 id = new Unsigned32();

    QuotaBlock(Runtime runtime) {
        super(runtime);
    }
}
