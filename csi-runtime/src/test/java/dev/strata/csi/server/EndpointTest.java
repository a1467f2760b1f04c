package dev.strata.csi.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.flags.UsageException;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class EndpointTest {

    @Test
    void acceptsTheFormsSidecarsUse() throws UsageException {
        assertEquals(Path.of("/csi/csi.sock"), Endpoint.parse("unix:///csi/csi.sock").socket());
        assertEquals(Path.of("/csi/csi.sock"), Endpoint.parse("unix:/csi/csi.sock").socket());
        assertEquals(Path.of("/csi/csi.sock"), Endpoint.parse("/csi/csi.sock").socket());
        assertEquals(Path.of("/csi/csi.sock"), Endpoint.parse("unix:///csi/x/../csi.sock").socket());
    }

    @Test
    void rejectsWhatIsNotAnAbsoluteUnixSocketPath() {
        assertThrows(UsageException.class, () -> Endpoint.parse("tcp://0.0.0.0:10000"));
        assertThrows(UsageException.class, () -> Endpoint.parse("unix://csi.sock"));
        assertThrows(UsageException.class, () -> Endpoint.parse(""));
        assertThrows(UsageException.class, () -> Endpoint.parse("/csi/a\0b"));
        assertThrows(UsageException.class, () -> Endpoint.parse("/" + "x".repeat(107)));
    }
}
