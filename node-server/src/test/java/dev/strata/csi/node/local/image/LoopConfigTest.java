package dev.strata.csi.node.local.image;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.strata.csi.linux.Kernel;
import java.nio.charset.StandardCharsets;
import jnr.ffi.Struct;
import org.junit.jupiter.api.Test;

/** The layout of struct loop_config as linux/loop.h has it: the kernel reads these bytes. */
class LoopConfigTest {

    private final Kernel kernel = new Kernel();

    @Test
    void sizesAndOffsetsAreTheKernels() {
        LoopConfig config = kernel.allocate(new LoopConfig(kernel.runtime()));
        assertEquals(LoopConfig.SIZE, Struct.size(config));
        assertEquals(LoopConfig.LoopInfo64.SIZE, Struct.size(config.info));
        assertEquals(0, config.fd.offset());
        assertEquals(4, config.blockSize.offset());
        assertEquals(8 + 52, config.info.flags.offset(), "offsets of an inner structure count from the outer one");
    }

    @Test
    void fieldsLandWhereTheKernelReadsThem() {
        LoopConfig config = kernel.allocate(new LoopConfig(kernel.runtime()));
        config.fd.set(7);
        config.info.flags.set(16);
        config.info.fileName("/pool/" + "x".repeat(100));
        var memory = Struct.getMemory(config);
        assertEquals(7, memory.getInt(0));
        assertEquals(16, memory.getInt(8 + 52));
        byte[] name = new byte[64];
        memory.get(8 + 56, name, 0, 64);
        assertEquals("/pool/" + "x".repeat(57) + "\0", new String(name, StandardCharsets.UTF_8), "63 bytes and a NUL");
    }
}
