package dev.strata.csi.controller.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.rpc.CsiException;
import io.grpc.Status;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class VolumeRequestTest {

    private static final long MIB = 1 << 20;

    private static CreateVolumeRequest.Builder request(String fsType) {
        return CreateVolumeRequest.newBuilder().setName("pvc-1").addVolumeCapabilities(VolumeCapability.newBuilder()
                .setMount(VolumeCapability.MountVolume.newBuilder().setFsType(fsType))
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)));
    }

    private static Status.Code code(Runnable call) {
        return assertThrows(CsiException.class, call::run).code();
    }

    @Test
    void sizeIsRoundedUpToWholeMebibytes() {
        assertEquals(2 * MIB, VolumeRequest.size(CapacityRange.newBuilder().setRequiredBytes(MIB + 1).build(), MIB));
        assertEquals(MIB, VolumeRequest.size(CapacityRange.newBuilder().setRequiredBytes(1).build(), MIB));
        assertEquals(1L << 30, VolumeRequest.size(CapacityRange.getDefaultInstance(), MIB), "no range: 1 GiB");
        assertEquals(10 * MIB, VolumeRequest.size(CapacityRange.newBuilder().setLimitBytes(10 * MIB).build(), MIB),
                "only a limit: the default, capped by the limit");
    }

    @Test
    void rangesThatCannotBeMetAreOutOfRange() {
        assertEquals(Status.Code.OUT_OF_RANGE, code(() -> VolumeRequest.size(
                CapacityRange.newBuilder().setRequiredBytes(10 * MIB).setLimitBytes(5 * MIB).build(), MIB)));
        assertEquals(Status.Code.OUT_OF_RANGE, code(() -> VolumeRequest.size(
                CapacityRange.newBuilder().setRequiredBytes(MIB + 1).setLimitBytes(MIB + 10).build(), MIB)));
    }

    @Test
    void xfsVolumesAreAtLeastWhatMkfsXfsAccepts() {
        VolumeRequest xfs = VolumeRequest.of(request("xfs").setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(MIB)).build());
        assertEquals(300 * MIB, xfs.capacityBytes());
        VolumeRequest ext4 = VolumeRequest.of(request("ext4").setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(MIB)).build());
        assertEquals(MIB, ext4.capacityBytes());
    }

    @Test
    void parameters() {
        assertEquals(Allocation.SPARSE, VolumeRequest.of(request("").build()).allocation());
        assertEquals(Allocation.FULL, VolumeRequest.of(request("").putParameters("allocation", "full").build()).allocation());
        assertEquals(Allocation.SPARSE, VolumeRequest.of(request("")
                .putParameters("csi.storage.k8s.io/pvc/name", "data").build()).allocation(), "the provisioner's own keys are ignored");
        CsiException typo = assertThrows(CsiException.class, () -> VolumeRequest.of(request("").putParameters("alocation", "full").build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, typo.code());
        assertTrue(typo.getMessage().contains("'alocation' for a local volume (did you mean allocation?)"), typo.getMessage());
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> VolumeRequest.of(request("").putParameters("allocation", "thick").build())));
    }

    @ParameterizedTest
    @CsvSource({"fsType,xfs", "fstype,ext4", "FSType,btrfs", "csi.storage.k8s.io/fstype,xfs"})
    void theFilesystemKeyIsAcceptedWhenTheCapabilityAgreesOrSaysNothing(String key, String fsType) {
        assertEquals(Allocation.FULL, VolumeRequest.of(request(fsType).putParameters(key, fsType)
                .putParameters("allocation", "full").build()).allocation());
        VolumeRequest.of(request("").putParameters(key, fsType).build()); // csi-sanity's capability names no filesystem
        VolumeRequest.of(CreateVolumeRequest.newBuilder().setName("pvc-1").putParameters(key, fsType) // a block claim of the class
                .addVolumeCapabilities(VolumeCapability.newBuilder().setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)))
                .build());
        assertEquals(Optional.empty(), VolumeRequest.parameterProblem(Map.of(key, fsType)), "ValidateVolumeCapabilities too");
    }

    @Test
    void theFilesystemKeyAndTheCapabilityMustAgree() {
        CsiException e = assertThrows(CsiException.class, () -> VolumeRequest.of(request("ext4").putParameters("fsType", "xfs").build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.code());
        assertEquals("StorageClass parameter fsType is 'xfs' but the volume capability's fs_type is 'ext4'", e.getMessage());
        CsiException unknown = assertThrows(CsiException.class, () -> VolumeRequest.of(request("").putParameters("fstype", "ntfs").build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, unknown.code());
        assertTrue(unknown.getMessage().contains("'ntfs'"), unknown.getMessage());
        VolumeRequest.of(CreateVolumeRequest.newBuilder().setName("pvc-1").putParameters("fstype", "ntfs") // a block claim makes none
                .addVolumeCapabilities(VolumeCapability.newBuilder().setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)))
                .build());
    }

    @Test
    void missingOrUnsupportedFieldsAreInvalidArguments() {
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> VolumeRequest.of(request("").setName("").build())));
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> VolumeRequest.of(request("").clearVolumeCapabilities().build())));
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> VolumeRequest.of(request("ntfs").build())));
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> VolumeRequest.of(request("").setName("../../etc").build())));
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> VolumeRequest.of(CreateVolumeRequest.newBuilder().setName("pvc-2")
                .addVolumeCapabilities(VolumeCapability.newBuilder().setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER)))
                .build())));
    }

    /** ValidateVolumeCapabilities (parameterProblem) refuses what CreateVolume refuses, with the same words: one parse. */
    @ParameterizedTest
    @CsvSource({"encryption=aes", "encryption=LUKS2", "pool=lvm;encryption=luks2", "alocation=full"})
    void validateRefusesTheParametersCreateVolumeRefuses(String pairs) {
        Map<String, String> parameters = new java.util.TreeMap<>();
        for (String pair : pairs.split(";")) {
            parameters.put(pair.split("=")[0], pair.split("=")[1]);
        }
        CsiException refused = assertThrows(CsiException.class, () -> VolumeRequest.of(request("").putAllParameters(parameters).build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, refused.code());
        assertEquals(Optional.of(refused.getMessage()), VolumeRequest.parameterProblem(parameters));
        assertEquals(Optional.empty(), VolumeRequest.parameterProblem(Map.of("encryption", "luks2")));
    }

    /** ControllerModifyVolume refuses the mutable parameters CreateVolume refuses, with the same words, and takes what it takes. */
    @Test
    void modifyRefusesTheMutableParametersCreateVolumeRefuses() {
        Map<String, String> bad = Map.of("readIOPS", "-1");
        CsiException atCreate = assertThrows(CsiException.class, () -> VolumeRequest.of(request("").putAllMutableParams(bad).build()));
        CsiException atModify = assertThrows(CsiException.class, () -> RequestKeys.mutable(bad));
        assertEquals(Status.Code.INVALID_ARGUMENT, atCreate.code());
        assertEquals(atCreate.getMessage(), atModify.getMessage());
        Map<String, String> good = Map.of("readIOPS", "100");
        assertEquals(VolumeRequest.of(request("").putAllMutableParams(good).build()).ioLimits(), RequestKeys.mutable(good));
    }
}
