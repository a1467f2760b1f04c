package dev.strata.csi.controller.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.IoLimits;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.Map;
import org.junit.jupiter.api.Test;

class IoLimitParametersTest {

    @Test
    void eachKeySetsItsLimitAndMaxRemovesIt() {
        assertEquals(IoLimits.newBuilder().setReadIops(500).setWriteIops(0).setReadBytesPerSecond(50L << 20)
                        .setWriteBytesPerSecond(20_000_000).build(),
                IoLimitParameters.parse(Map.of("readIOPS", "500", "writeIOPS", "max", "readBytesPerSecond", "50Mi",
                        "writeBytesPerSecond", "20M")));
    }

    @Test
    void aKeyLeftOutIsLeftUnsetSoItsLimitStays() {
        IoLimits limits = IoLimitParameters.parse(Map.of("writeIOPS", "10"));
        assertTrue(limits.hasWriteIops());
        assertFalse(limits.hasReadIops() || limits.hasReadBytesPerSecond() || limits.hasWriteBytesPerSecond());
        assertFalse(IoLimitParameters.any(IoLimitParameters.parse(Map.of())));
        assertFalse(IoLimitParameters.any(IoLimitParameters.parse(Map.of("csi.storage.k8s.io/pvc/name", "data"))),
                "the sidecars' own keys are ignored");
    }

    @Test
    void bytesTakeTheSuffixesOfAKubernetesQuantity() {
        for (var entry : Map.of("1", 1L, "3k", 3_000L, "2M", 2_000_000L, "1G", 1_000_000_000L, "1T", 1_000_000_000_000L,
                "4Ki", 4_096L, "1Mi", 1L << 20, "2Gi", 2L << 30, "1Ti", 1L << 40).entrySet()) {
            assertEquals(entry.getValue(), IoLimitParameters.parse(Map.of("readBytesPerSecond", entry.getKey())).getReadBytesPerSecond(),
                    entry.getKey());
        }
    }

    @Test
    void anUnknownKeyOrABadValueIsInvalidArgumentWithAClearMessage() {
        CsiException unknown = assertThrows(CsiException.class, () -> IoLimitParameters.parse(Map.of("writeMBps", "5")));
        assertEquals(Status.Code.INVALID_ARGUMENT, unknown.code());
        assertTrue(unknown.getMessage().contains("may set: readBytesPerSecond, readIOPS, writeBytesPerSecond, writeIOPS"), unknown.getMessage());
        for (var bad : Map.of("readIOPS", "1k", "writeIOPS", "0", "readBytesPerSecond", "-1", "writeBytesPerSecond", "1.5Mi",
                "readIOPS ", "5").entrySet()) {
            CsiException refused = assertThrows(CsiException.class, () -> IoLimitParameters.parse(Map.of(bad.getKey(), bad.getValue())),
                    bad.toString());
            assertEquals(Status.Code.INVALID_ARGUMENT, refused.code(), bad.toString());
        }
        for (String bad : new String[] {"", " 5", "05", "MAX", "unlimited", "9999999999999999999", "9999999Ti"}) {
            assertEquals(Status.Code.INVALID_ARGUMENT, assertThrows(CsiException.class,
                    () -> IoLimitParameters.parse(Map.of("writeBytesPerSecond", bad))).code(), "'" + bad + "'");
        }
    }
}
