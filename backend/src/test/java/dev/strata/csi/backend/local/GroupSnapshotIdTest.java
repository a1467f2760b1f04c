package dev.strata.csi.backend.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.Optional;
import org.junit.jupiter.api.Test;

class GroupSnapshotIdTest {

    @Test
    void roundTripsAndNamesItsMembers() {
        GroupSnapshotId id = new GroupSnapshotId("groupsnapshot-1234");
        assertEquals("local-group-snapshot/groupsnapshot-1234", id.toString());
        assertEquals(Optional.of(id), GroupSnapshotId.parse(id.toString()));
        assertEquals("groupsnapshot-1234-0", id.member(0));
        LocalSnapshotId.checkName(new GroupSnapshotId("g".repeat(121)).member(999_999)); // the longest name, the most members
    }

    @Test
    void anIdOfAnotherSchemeOrShapeIsNoGroup() {
        for (String id : new String[] {"", "local-group-snapshot", "local-group-snapshot/", "local-group-snapshot/a/b",
                "local-snapshot/node/a", "nfs-snapshot/x", "local-group-snapshot/-a", "local-group-snapshot/" + "g".repeat(122)}) {
            assertEquals(Optional.empty(), GroupSnapshotId.parse(id), id);
        }
        CsiException e = assertThrows(CsiException.class, () -> GroupSnapshotId.checkName("a/b"));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    }
}
