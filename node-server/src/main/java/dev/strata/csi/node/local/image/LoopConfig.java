package dev.strata.csi.node.local.image;

import java.nio.charset.StandardCharsets;
import jnr.ffi.NativeType;
import jnr.ffi.Runtime;
import jnr.ffi.Struct;

/**
 * {@code struct loop_config} of linux/loop.h, the argument of LOOP_CONFIGURE: the backing file's
 * descriptor, the block size and a {@code struct loop_info64}, which alone is the argument of
 * LOOP_SET_STATUS64 on kernels before 5.8.
 */
final class LoopConfig extends Struct {

    /** Bytes of the structure: 4 + 4 + 232 + 8 * 8. */
    static final int SIZE = 304;

    final Unsigned32 fd = new Unsigned32();
    /** The logical sector size; 0: the kernel picks (512, or the file's direct I/O alignment for direct I/O). */
    final Unsigned32 blockSize = new Unsigned32();
    final LoopInfo64 info = inner(new LoopInfo64(getRuntime()));
    final Padding reserved = new Padding(NativeType.ULONGLONG, 8);

    LoopConfig(Runtime runtime) {
        super(runtime);
    }

    /** {@code struct loop_info64}. */
    static final class LoopInfo64 extends Struct {

        static final int SIZE = 232;
        /** LO_NAME_SIZE: the name holds this many bytes with its terminating NUL. */
        static final int NAME_BYTES = 64;

        final Unsigned64 device = new Unsigned64();
        final Unsigned64 inode = new Unsigned64();
        final Unsigned64 rdevice = new Unsigned64();
        final Unsigned64 offset = new Unsigned64();
        final Unsigned64 sizeLimit = new Unsigned64();
        final Unsigned32 number = new Unsigned32();
        final Unsigned32 encryptType = new Unsigned32();
        final Unsigned32 encryptKeySize = new Unsigned32();
        final Unsigned32 flags = new Unsigned32();
        final Padding fileName = new Padding(NativeType.UCHAR, NAME_BYTES);
        final Padding cryptName = new Padding(NativeType.UCHAR, NAME_BYTES);
        final Padding encryptKey = new Padding(NativeType.UCHAR, 32);
        final Padding init = new Padding(NativeType.ULONGLONG, 2);

        LoopInfo64(Runtime runtime) {
            super(runtime);
        }

        /**
         * Sets lo_file_name, which only LOOP_GET_STATUS64 reports (sysfs names the whole path):
         * the path's first 63 bytes, as losetup stores it.
         */
        void fileName(java.lang.String path) {
            byte[] bytes = path.getBytes(StandardCharsets.UTF_8);
            int length = Math.min(bytes.length, NAME_BYTES - 1);
            getMemory(this).put(fileName.offset(), bytes, 0, length);
            getMemory(this).putByte(fileName.offset() + length, (byte) 0);
        }
    }
}
