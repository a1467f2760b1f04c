package dev.strata.csi.backend.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class NfsSnapshotIdTest {

    @Test
    void roundTripsWithSlashesInShareAndName() {
        NfsSnapshotId id = new NfsSnapshotId(new NfsVolume("nfs.example", "/srv/share", ""), "snapshot-1/a b");
        assertEquals("nfs-snapshot/nfs.example/%2Fsrv%2Fshare/snapshot-1%2Fa%20b", id.toString());
        assertEquals(Optional.of(id), NfsSnapshotId.parse(id.toString()));
        NfsSnapshotId ipv6 = new NfsSnapshotId(new NfsVolume("[fd00::7]", "/", ""), "s");
        assertEquals(Optional.of(ipv6), NfsSnapshotId.parse(ipv6.toString()));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "nfs-snapshot", "nfs-snapshot/s/%2Fx", "nfs-snapshot/s/%2fx/n", "nfs-snapshot/s/x/n",
        "nfs-snapshot/s/%2Fx/", "nfs-snapshot/s/%2Fx/n%", "nfs-snapshot/s/%2Fx/%0A", "nfs-snapshot/s/%2Fx/n/extra",
        "nfs-snapshot/a%2Fb/%2Fx/n", "nfs/s/%2Fx/v/delete", "nfs-snapshot/s/%2Fx/a-b_c.d~e%41"})
    void onlyCanonicalIdsParse(String id) {
        assertEquals(Optional.empty(), NfsSnapshotId.parse(id));
    }

    @Test
    void aVolumeIdIsNoSnapshotIdAndTheOtherWayRound() {
        NfsVolume export = new NfsVolume("s", "/x", "");
        assertEquals(Optional.empty(), NfsVolumeId.parse(new NfsSnapshotId(export, "n").toString()));
        assertEquals(Optional.empty(), NfsSnapshotId.parse(new NfsVolumeId(new NfsVolume("s", "/x", "v"), OnDelete.DELETE).toString()));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "a\nb", "\u007f"})
    void namesWithoutRoomOrWithControlCharactersAreRefused(String name) {
        CsiException e = assertThrows(CsiException.class, () -> NfsSnapshotId.checkName(name));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
        assertEquals(Status.Code.INVALID_ARGUMENT, assertThrows(CsiException.class, () -> NfsSnapshotId.checkName("x".repeat(256))).code());
    }
}
