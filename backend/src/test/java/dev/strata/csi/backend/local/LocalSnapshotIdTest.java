package dev.strata.csi.backend.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class LocalSnapshotIdTest {

    @Test
    void roundTrips() {
        LocalSnapshotId id = new LocalSnapshotId("worker-1", "snapshot-0f3e9a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b");
        assertEquals("local-snapshot/worker-1/snapshot-0f3e9a4c-1b2d-4e5f-8a9b-0c1d2e3f4a5b", id.toString());
        assertEquals(Optional.of(id), LocalSnapshotId.parse(id.toString()));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "local-snapshot", "local-snapshot/n", "local-snapshot/n/", "local/n/v", "local-snapshot/n/..",
        "local-snapshot/n/.hidden", "local-snapshot/../s", "local-snapshot/n/s/extra", "local-snapshot/n/a b"})
    void idsNeverHandedOutDoNotParse(String id) {
        assertEquals(Optional.empty(), LocalSnapshotId.parse(id));
    }

    @Test
    void aVolumeIdIsNoSnapshotIdAndTheOtherWayRound() {
        assertEquals(Optional.empty(), LocalSnapshotId.parse("local/n/pvc-1"));
        assertEquals(Optional.empty(), LocalVolumeId.parse("local-snapshot/n/snap-1"));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "..", "a/b", "-dash", "sp ace"})
    void namesThatCouldLeaveThePoolAreRefused(String name) {
        assertEquals(Status.Code.INVALID_ARGUMENT, assertThrows(CsiException.class, () -> LocalSnapshotId.checkName(name)).code());
    }
}
