package dev.strata.csi.controller.nfs;

import jnr.ffi.NativeType;
import jnr.ffi.Runtime;
import jnr.ffi.Struct;

/**
 * {@code struct fsxattr} of linux/fs.h, the argument of FS_IOC_FSGETXATTR and FS_IOC_FSSETXATTR:
 * among other things the inode's extended flags and its project id.
 */
final class FsXattr extends Struct {

    /** Bytes of the structure: five 32-bit fields and 8 bytes of padding. */
    static final int SIZE = 28;
    /** FS_XFLAG_PROJINHERIT: files and directories made in this directory get its project id. */
    static final int PROJECT_INHERIT = 0x200;

    final Unsigned32 flags = new Unsigned32();
    final Unsigned32 extentSize = new Unsigned32();
    final Unsigned32 extents = new Unsigned32();
    final Unsigned32 projectId = new Unsigned32();
    final Unsigned32 cowExtentSize = new Unsigned32();
    final Padding pad = new Padding(NativeType.UCHAR, 8);

    FsXattr(Runtime runtime) {
        super(runtime);
    }
}
