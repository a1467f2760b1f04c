package dev.strata.csi.node.backend;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import csi.v1.Csi.NodeServiceCapability;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.node.local.LocalNodeBackend;
import dev.strata.csi.node.nfs.NfsNodeBackend;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * Which backend serves a volume on the node, decided in NodeBackends alone, with the real
 * backends (choosing touches none of their system parts, so those are left out).
 */
class NodeBackendsTest {

    private static final Map<String, String> NFS_CONTEXT = Map.of("server", "10.0.0.5", "share", "/exports", "subDir", "media");

    private final NodeBackends backends = new NodeBackends(List.of(
            new LocalNodeBackend("node-a", null, null, null, null, null, null, null, null),
            new NfsNodeBackend(null, null, null, null)));

    @Test
    void theIdSchemeChoosesFirstWhateverTheContextSays() {
        var local = backends.withContext("local/node-a/pvc-1", NFS_CONTEXT);
        assertInstanceOf(LocalNodeBackend.class, local.backend());
        assertEquals(new LocalVolumeId("node-a", "pvc-1"), local.volume());
        assertEquals("pvc-1", local.lockKey());

        String nfsId = "nfs/10.0.0.5/%2Fexports/pvc-2/delete";
        var nfs = backends.withContext(nfsId, NFS_CONTEXT);
        assertEquals(new NfsNodeBackend.Share(nfsId, Optional.of(new NfsVolume("10.0.0.5", "/exports", "pvc-2"))), nfs.volume());
        assertEquals("nfs " + nfsId, nfs.lockKey());
    }

    @Test
    void aStaticVolumeIsTheBackendItsContextDescribes() {
        var chosen = backends.withContext("media-archive", NFS_CONTEXT);
        assertEquals(new NfsNodeBackend.Share("media-archive", Optional.of(new NfsVolume("10.0.0.5", "/exports", "media"))),
                chosen.volume());

        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class, () -> backends.withContext("media-archive", Map.of())).code());
        assertEquals(Status.Code.INVALID_ARGUMENT,
                assertThrows(CsiException.class, () -> backends.withContext("media-archive", Map.of("server", "10.0.0.5"))).code());
    }

    @Test
    void withoutAContextAnIdNoSchemeClaimsIsAStaticVolumeKnownByItsPath() {
        var chosen = backends.withoutContext("media-archive");
        assertEquals(new NfsNodeBackend.Share("media-archive", Optional.empty()), chosen.volume());
        assertInstanceOf(LocalNodeBackend.class, backends.withoutContext("local/node-b/pvc-1").backend()); // NOT_FOUND comes from the backend
    }

    @Test
    void theServiceAdvertisesWhatTheBackendsNeedOnce() {
        assertEquals(List.of(NodeServiceCapability.RPC.Type.STAGE_UNSTAGE_VOLUME, NodeServiceCapability.RPC.Type.GET_VOLUME_STATS,
                NodeServiceCapability.RPC.Type.VOLUME_CONDITION, NodeServiceCapability.RPC.Type.SINGLE_NODE_MULTI_WRITER,
                NodeServiceCapability.RPC.Type.EXPAND_VOLUME),
                backends.rpcCapabilities());
    }
}
