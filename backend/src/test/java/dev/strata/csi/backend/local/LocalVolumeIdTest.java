package dev.strata.csi.backend.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class LocalVolumeIdTest {

    @Test
    void roundTrips() {
        LocalVolumeId id = new LocalVolumeId("worker-1.example.com", "pvc-0f3e9a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b");
        assertEquals("local/worker-1.example.com/pvc-0f3e9a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b", id.toString());
        assertEquals(Optional.of(id), LocalVolumeId.parse(id.toString()));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "local", "local/n", "local/n/", "local//v", "nfs/n/v", "local/n/v/extra",
        "local/n/..", "local/n/.hidden", "local/../v", "local/n/a\0b", "local/n/a b", "reallyfakevolumeid"})
    void idsNeverHandedOutDoNotParse(String id) {
        assertEquals(Optional.empty(), LocalVolumeId.parse(id));
        CsiException e = assertThrows(CsiException.class, () -> LocalVolumeId.require(id));
        assertEquals(Status.Code.NOT_FOUND, e.code());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "..", ".", "../../etc/passwd", "/abs", "a/b", "name with space", "nul\0byte", "-dash-first"})
    void namesThatCouldLeaveThePoolAreRefused(String name) {
        CsiException e = assertThrows(CsiException.class, () -> LocalVolumeId.checkName(name));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
        assertTrue(!e.getMessage().contains("\0"), "the message escapes control characters");
    }

    @Test
    void longestNameIs128Characters() {
        LocalVolumeId.checkName("a".repeat(128));
        assertThrows(CsiException.class, () -> LocalVolumeId.checkName("a".repeat(129)));
    }
}
