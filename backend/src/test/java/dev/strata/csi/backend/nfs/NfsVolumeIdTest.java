package dev.strata.csi.backend.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class NfsVolumeIdTest {

    @Test
    void roundTripsWithSlashesInShareAndSubDir() {
        NfsVolumeId id = new NfsVolumeId(new NfsVolume("nfs.example", "/srv/share", "team a/pvc-1"), OnDelete.ARCHIVE);
        assertEquals("nfs/nfs.example/%2Fsrv%2Fshare/team%20a%2Fpvc-1/archive", id.toString());
        assertEquals(Optional.of(id), NfsVolumeId.parse(id.toString()));
        NfsVolumeId ipv6 = new NfsVolumeId(new NfsVolume("[fd00::7]", "/", "v"), OnDelete.DELETE);
        assertEquals(Optional.of(ipv6), NfsVolumeId.parse(ipv6.toString()));
        assertEquals("[fd00::7]:/v", ipv6.volume().source());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "nfs", "nfs/s/%2Fx/v", "nfs/s/%2Fx/v/shred", "nfs/s/%2fx/v/delete", "nfs/s/%2Fx/%2E%2E/delete",
        "nfs/s/%2Fx/a%2F..%2Fb/delete", "nfs/s/x/v/delete", "nfs/s/%2Fx/%2Fv/delete", "nfs/a%2Fb/%2Fx/v/delete",
        "nfs/s/%2Fx/v%/delete", "nfs/s/%2Fx/v%zz/delete", "nfs/s/%2Fx/%00/delete", "local/n/v", "nfs/s/%2Fx/.strata-csi/delete"})
    void onlyCanonicalIdsOfSafePathsParse(String id) {
        assertEquals(Optional.empty(), NfsVolumeId.parse(id));
    }

    @ParameterizedTest
    @ValueSource(strings = {"../x", "/x", "a/./b", "a//b", "a/", "x\ny", ".strata-csi", ".strata-csi/records"})
    void subDirsOutsideTheShareAreRefused(String subDir) {
        CsiException e = assertThrows(CsiException.class, () -> new NfsVolume("s", "/share", subDir));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    }

    @Test
    void aVolumeContextNeedsServerAndShare() {
        assertEquals(Optional.empty(), NfsVolume.fromContext(Map.of("other", "x")));
        assertEquals(Optional.of(new NfsVolume("s", "/share", "d")), NfsVolume.fromContext(Map.of("server", "s", "share", "/share/", "subDir", "d/")));
        CsiException e = assertThrows(CsiException.class, () -> NfsVolume.fromContext(Map.of("share", "/share")));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    }
}
