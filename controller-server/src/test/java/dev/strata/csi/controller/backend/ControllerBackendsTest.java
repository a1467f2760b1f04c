package dev.strata.csi.controller.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.backend.nfs.OnDelete;
import dev.strata.csi.controller.local.LocalController;
import dev.strata.csi.controller.nfs.NfsController;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import java.time.Clock;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * Which backend serves a volume on the controller, decided in ControllerBackends alone, with the
 * real backends (choosing touches no export and no agent, so those are left out).
 */
class ControllerBackendsTest {

    private static final Map<String, String> NFS = Map.of("server", "10.0.0.5", "share", "/exports");
    private static final String NFS_ID = new NfsVolumeId(new NfsVolume("10.0.0.5", "/exports", "pvc-2"), OnDelete.DELETE).toString();

    private final ControllerBackends backends = new ControllerBackends(List.of(
            new NfsController(null, null, Duration.ofSeconds(1), Clock.systemUTC(), Crashes.none(), null),
            new LocalController(null, null, null, Crashes.none(), null)));

    private static CreateVolumeRequest create(Map<String, String> parameters) {
        return CreateVolumeRequest.newBuilder().setName("pvc-1").putAllParameters(parameters)
                .addVolumeCapabilities(VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)))
                .build();
    }

    @Test
    void storageClassParametersChooseTheBackendOfANewVolumeAndItsLock() {
        var nfs = backends.forCreate(create(NFS));
        assertInstanceOf(NfsController.class, nfs.backend());
        assertEquals("nfs 10.0.0.5:/exports/pvc-1", nfs.lockKey());
        var local = backends.forCreate(create(Map.of("allocation", "full")));
        assertInstanceOf(LocalController.class, local.backend());
        assertEquals("pvc-1", local.lockKey());
        // The backend checks its own parameters: a typo is refused, not taken for another backend's.
        assertEquals(Status.Code.INVALID_ARGUMENT, assertThrows(CsiException.class, () -> backends.forCreate(create(Map.of("sever", "x")))).code());
        assertInstanceOf(NfsController.class, backends.forParameters(NFS));
    }

    @Test
    void anExistingVolumeIsChosenByItsIdSchemeThenByItsContext() {
        var local = backends.withContext("local/node-a/pvc-1", Map.of("server", "10.0.0.5", "share", "/exports"));
        assertEquals(new LocalVolumeId("node-a", "pvc-1"), local.volume());
        var dynamic = backends.withContext(NFS_ID, Map.of());
        assertEquals("nfs 10.0.0.5:/exports/pvc-2", dynamic.lockKey());
        var stat = backends.withContext("media-archive", NFS);
        assertEquals(new NfsController.VolumeHandle("media-archive", Optional.empty(),
                Optional.of(new NfsVolume("10.0.0.5", "/exports", ""))), stat.volume());
        assertEquals("nfs static media-archive", stat.lockKey());
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class, () -> backends.withContext("media-archive", Map.of())).code());
    }

    @Test
    void onlyAnIdTheDriverHandedOutIsDeletedAndAnUnknownIdIsUnpublishedAsAStaticVolume() {
        assertTrue(backends.provisioned("media-archive").isEmpty());
        assertInstanceOf(LocalController.class, backends.provisioned("local/node-a/pvc-1").orElseThrow().backend());
        assertEquals(new NfsController.VolumeHandle("media-archive", Optional.empty(), Optional.empty()),
                backends.withoutContext("media-archive").orElseThrow().volume());
    }
}
