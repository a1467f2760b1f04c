package dev.strata.csi.controller.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.nfs.OnDelete;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class NfsRequestTest {

    static final Map<String, String> METADATA = Map.of("csi.storage.k8s.io/pvc/name", "data",
            "csi.storage.k8s.io/pvc/namespace", "shop", "csi.storage.k8s.io/pv/name", "pvc-1");

    @Test
    void everyVariableIsFilled() {
        assertEquals("shop/data/pvc-1", NfsRequest.fill("${pvc.metadata.namespace}/${pvc.metadata.name}/${pv.metadata.name}", METADATA));
        assertEquals("plain", NfsRequest.fill("plain", Map.of()));
        assertEquals("a$b", NfsRequest.fill("a$b", Map.of()), "a lone $ is no variable");
    }

    @ParameterizedTest
    @ValueSource(strings = {"${pvc.metadata.labels}", "${pvc.metadata.name", "${}", "x/${PVC.METADATA.NAME}"})
    void unknownOrUnclosedVariablesAreInvalid(String template) {
        CsiException e = assertThrows(CsiException.class, () -> NfsRequest.fill(template, METADATA));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    }

    @Test
    void aVariableWithoutItsParameterSaysWhichFlagIsMissing() {
        CsiException e = assertThrows(CsiException.class, () -> NfsRequest.fill("${pvc.metadata.name}", Map.of()));
        assertTrue(e.getMessage().contains("--extra-create-metadata"), e.getMessage());
    }

    @Test
    void defaultsAreTheVolumeNameDeleteAndNoMode() {
        NfsRequest request = NfsRequest.of(request(Map.of("server", "s", "share", "/x")));
        assertEquals("pvc-1", request.volume().subDir());
        assertEquals(OnDelete.DELETE, request.onDelete());
        assertEquals(Optional.empty(), request.mode());
        assertEquals(0, request.capacityBytes());
    }

    @Test
    void capacityIsRoundedUpToWholeMebibytes() {
        NfsRequest request = NfsRequest.of(request(Map.of("server", "s", "share", "/x")).toBuilder()
                .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(1)).build());
        assertEquals(1 << 20, request.capacityBytes());
    }

    @ParameterizedTest
    @ValueSource(strings = {"777x", "0888", "4755", "rwx", ""})
    void modesMustBePermissionBits(String mode) {
        CsiException e = assertThrows(CsiException.class,
                () -> NfsRequest.of(request(Map.of("server", "s", "share", "/x", "mountPermissions", mode))));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
    }

    @ParameterizedTest
    @ValueSource(strings = {"fsType", "fstype", "FSType", "csi.storage.k8s.io/fstype"})
    void theFilesystemKeyIsIgnored(String key) {
        NfsRequest request = NfsRequest.of(request(Map.of("server", "s", "share", "/x", key, "xfs")));
        assertEquals("s:/x/pvc-1", request.volume().source());
    }

    @Test
    void aMisspeltKeyIsRefusedWithTheKnownOnes() {
        CsiException e = assertThrows(CsiException.class,
                () -> NfsRequest.of(request(Map.of("server", "s", "share", "/x", "subdir", "a"))));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
        assertTrue(e.getMessage().startsWith("unknown StorageClass parameter 'subdir' for an NFS volume (did you mean subDir?); "
                + "an administrator may set: mountPermissions, onDelete, server, share, subDir"), e.getMessage());
    }

    static CreateVolumeRequest request(Map<String, String> parameters) {
        return CreateVolumeRequest.newBuilder().setName("pvc-1").putAllParameters(parameters)
                .addVolumeCapabilities(VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER)))
                .build();
    }
}
