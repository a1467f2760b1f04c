package dev.strata.csi.conformance;

import static csi.v1.Csi.ControllerServiceCapability.RPC.Type.CREATE_DELETE_VOLUME;
import static csi.v1.Csi.ControllerServiceCapability.RPC.Type.GET_CAPACITY;
import static csi.v1.Csi.ControllerServiceCapability.RPC.Type.LIST_VOLUMES;
import static csi.v1.Csi.ControllerServiceCapability.RPC.Type.MODIFY_VOLUME;
import static csi.v1.Csi.ControllerServiceCapability.RPC.Type.PUBLISH_UNPUBLISH_VOLUME;
import static csi.v1.Csi.NodeServiceCapability.RPC.Type.GET_VOLUME_STATS;
import static csi.v1.Csi.NodeServiceCapability.RPC.Type.STAGE_UNSTAGE_VOLUME;
import static csi.v1.Csi.PluginCapability.Service.Type.CONTROLLER_SERVICE;
import static csi.v1.Csi.PluginCapability.Service.Type.VOLUME_ACCESSIBILITY_CONSTRAINTS;
import static dev.strata.csi.conformance.ConformanceTarget.madeUpId;
import static dev.strata.csi.conformance.ConformanceTarget.uniqueName;
import static dev.strata.csi.conformance.StatusAssertions.assertCode;
import static dev.strata.csi.conformance.StatusAssertions.assertCodeIn;
import static io.grpc.Status.Code.ABORTED;
import static io.grpc.Status.Code.ALREADY_EXISTS;
import static io.grpc.Status.Code.INVALID_ARGUMENT;
import static io.grpc.Status.Code.NOT_FOUND;
import static io.grpc.Status.Code.OK;
import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.ProtocolMessageEnum;
import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import csi.v1.Csi.ControllerModifyVolumeRequest;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerServiceCapability;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.GetCapacityResponse;
import csi.v1.Csi.GetPluginCapabilitiesRequest;
import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.GetPluginInfoResponse;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.NodeGetCapabilitiesRequest;
import csi.v1.Csi.NodeGetInfoResponse;
import csi.v1.Csi.NodeGetVolumeStatsRequest;
import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeServiceCapability;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.PluginCapability;
import csi.v1.Csi.ProbeRequest;
import csi.v1.Csi.ProbeResponse;
import csi.v1.Csi.Topology;
import csi.v1.Csi.ValidateVolumeCapabilitiesRequest;
import csi.v1.Csi.ValidateVolumeCapabilitiesResponse;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeUsage;
import dev.strata.csi.conformance.ConformanceTarget.Endpoint;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.DisabledIf;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The CSI requirements csi-sanity checks (required fields, error codes, idempotency,
 * capabilities), as our own tests against one controller endpoint and one node endpoint: a local
 * cluster by default, or any driver's endpoints given with {@code -Dconformance.controller} and
 * {@code -Dconformance.node} (see {@link ConformanceTarget}).
 *
 * <p>Checks of an RPC behind a capability run only when the driver advertises it, and are
 * reported as skipped otherwise; {@link #localDriverAdvertisesEverythingTheSuiteChecks} makes sure
 * nothing skips against our own driver. Every test undoes what it made ({@link Cleanup}), and
 * after each one nothing may be left mounted or attached below the suite's directories.
 */
@Tag("root")
class ConformanceTest {

    static final String ACCESS_TYPES = "dev.strata.csi.conformance.ConformanceTarget#accessTypes";

    /** How often a repeated call is sent: each repetition after the first must change nothing. */
    static final int REPEATS = 10;

    @TempDir
    static Path dir;

    static ConformanceTarget target;

    Cleanup cleanup;

    @BeforeAll
    static void openTarget() throws Exception {
        target = ConformanceTarget.open(dir);
    }

    @AfterAll
    static void closeTarget() throws Exception {
        if (target != null) {
            target.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir), "mounts or loop devices left after the suite");
    }

    @BeforeEach
    void newCleanup() {
        cleanup = new Cleanup(target);
    }

    @AfterEach
    void undoAndCheckNothingIsLeft() {
        assertAll(
                cleanup::run,
                () -> assertEquals(List.of(), target.leftovers(), "the test left mounts or loop devices behind"));
    }

    @Test
    @DisabledIf(value = "dev.strata.csi.conformance.ConformanceTarget#external",
            disabledReason = "another driver may offer less; the suite then skips what it lacks")
    void localDriverAdvertisesEverythingTheSuiteChecks() {
        List<ProtocolMessageEnum> missing = ConformanceTarget.GATES.stream().filter(gate -> !target.advertises(gate)).toList();
        assertEquals(List.of(), missing, "our driver must advertise every capability the suite gates on, or checks skip in CI");
    }

    @Test
    @DisabledIf(value = "dev.strata.csi.conformance.ConformanceTarget#external", disabledReason = "restarts the driver's node-server")
    void volumesInUseSurviveARestartOfNodeServer() throws Exception {
        AccessType type = target.accessType();
        Volume volume = createVolume("restart", type);
        Map<String, String> publishContext = controllerPublish(volume, type);
        Path stagingPath = stage(volume, type, publishContext);
        Path targetPath = publish(volume, type, stagingPath, publishContext);
        Path image = target.imageOf(volume);
        byte[] data = new byte[1 << 20];
        ThreadLocalRandom.current().nextBytes(data);
        Path written = type == AccessType.BLOCK ? targetPath : targetPath.resolve("data");
        writeSynced(written, data);

        target.restartNode();

        assertEquals(1, SystemState.loopDevicesHolding(image).size(), "one loop device on the image after the restart");
        // kubelet repeats NodeStageVolume and NodePublishVolume for volumes in use once the plugin is back.
        target.node().nodeStageVolume(Requests.nodeStageVolume(volume, type, stagingPath, publishContext));
        target.node().nodePublishVolume(Requests.nodePublishVolume(volume, type, stagingPath, targetPath, publishContext));
        assertEquals(1, SystemState.loopDevicesHolding(image).size(), "one loop device on the image after kubelet's repeats");
        byte[] read = new byte[data.length];
        try (var in = Files.newInputStream(written)) {
            assertEquals(data.length, in.readNBytes(read, 0, read.length));
        }
        assertArrayEquals(data, read, "what was written before the restart");

        cleanup.run();
        assertEquals(List.of(), SystemState.loopDevicesOfFileNamed(image.getFileName().toString()),
                "no loop device left on the deleted image, in any namespace");
    }

    private static void writeSynced(Path file, byte[] data) throws Exception {
        try (var channel = java.nio.channels.FileChannel.open(file, java.nio.file.StandardOpenOption.WRITE,
                java.nio.file.StandardOpenOption.CREATE)) {
            channel.write(java.nio.ByteBuffer.wrap(data));
            channel.force(true);
        }
    }

    // Steps of the volume lifecycle, each registering its undo. A step the driver does not offer
    // is left out, as a CO leaves it out.

    CreateVolumeRequest newVolumeRequest(String purpose, AccessType type) {
        return Requests.createVolume(uniqueName(purpose), type, target.volumeBytes(), target.accessibleFromNode());
    }

    Volume create(CreateVolumeRequest request) {
        Volume volume = target.controller().createVolume(request).getVolume();
        cleanup.add(Requests.deleteVolume(volume));
        return volume;
    }

    Volume createVolume(String purpose, AccessType type) {
        return create(newVolumeRequest(purpose, type));
    }

    /** The publish context for the node calls; empty when the controller does not publish. */
    Map<String, String> controllerPublish(Volume volume, AccessType type) {
        if (!target.advertises(PUBLISH_UNPUBLISH_VOLUME)) {
            return Map.of();
        }
        Map<String, String> publishContext = target.controller()
                .controllerPublishVolume(Requests.controllerPublishVolume(volume, target.nodeId(), type)).getPublishContextMap();
        cleanup.add(Requests.controllerUnpublishVolume(volume, target.nodeId()));
        return publishContext;
    }

    /** The staging path; null when the node does not stage. */
    Path stage(Volume volume, AccessType type, Map<String, String> publishContext) throws Exception {
        if (!target.advertises(STAGE_UNSTAGE_VOLUME)) {
            return null;
        }
        Path stagingPath = target.newStagingPath();
        target.node().nodeStageVolume(Requests.nodeStageVolume(volume, type, stagingPath, publishContext));
        cleanup.add(Requests.nodeUnstageVolume(volume, stagingPath));
        return stagingPath;
    }

    Path publish(Volume volume, AccessType type, Path stagingPath, Map<String, String> publishContext) throws Exception {
        Path targetPath = target.newTargetPath();
        target.node().nodePublishVolume(Requests.nodePublishVolume(volume, type, stagingPath, targetPath, publishContext));
        cleanup.add(Requests.nodeUnpublishVolume(volume, targetPath));
        return targetPath;
    }

    record Published(Volume volume, Path stagingPath, Path targetPath) {}

    /** A new volume taken through every phase up to NodePublishVolume. */
    Published createAndPublish(String purpose, AccessType type) throws Exception {
        Volume volume = createVolume(purpose, type);
        Map<String, String> publishContext = controllerPublish(volume, type);
        Path stagingPath = stage(volume, type, publishContext);
        return new Published(volume, stagingPath, publish(volume, type, stagingPath, publishContext));
    }

    /** A volume id the driver handed out and then forgot: the volume was deleted. */
    String deletedVolumeId() {
        Volume volume = createVolume("deleted", target.accessType());
        cleanup.undo(Requests.deleteVolume(volume));
        return volume.getVolumeId();
    }

    static <E extends Enum<E> & ProtocolMessageEnum> void assertKnown(E value, String what) {
        assertFalse(value.name().equals("UNKNOWN") || value.name().equals("UNRECOGNIZED"),
                what + " " + value + " is not a value the CSI spec defines");
    }

    @Nested
    class Identity {

        /** The spec's rule: at most 63 characters, alphanumeric at both ends, dashes, dots and alphanumerics between. */
        static final Pattern PLUGIN_NAME = Pattern.compile("[A-Za-z0-9]([A-Za-z0-9.-]{0,61}[A-Za-z0-9])?");

        @ParameterizedTest
        @EnumSource(Endpoint.class)
        void getPluginInfoReturnsAConformingNameAndAVendorVersion(Endpoint endpoint) {
            GetPluginInfoResponse info = target.identity(endpoint).getPluginInfo(GetPluginInfoRequest.getDefaultInstance());
            assertTrue(info.getName().length() <= 63, "name longer than 63 characters: " + info.getName());
            assertTrue(PLUGIN_NAME.matcher(info.getName()).matches(), "name '" + info.getName()
                    + "' must begin and end with a letter or digit, with only letters, digits, '-' and '.' between");
            assertFalse(info.getVendorVersion().isEmpty(), "vendor_version is required");
        }

        @Test
        void controllerAndNodeNameTheSamePlugin() {
            // A CO matches the two halves of a driver by this name.
            assertEquals(target.identity(Endpoint.CONTROLLER).getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName(),
                    target.identity(Endpoint.NODE).getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName());
        }

        @ParameterizedTest
        @EnumSource(Endpoint.class)
        void getPluginCapabilitiesReturnsOnlyKnownCapabilities(Endpoint endpoint) {
            for (PluginCapability capability : target.identity(endpoint)
                    .getPluginCapabilities(GetPluginCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList()) {
                switch (capability.getTypeCase()) {
                    case SERVICE -> assertKnown(capability.getService().getType(), "plugin service capability");
                    case VOLUME_EXPANSION -> assertKnown(capability.getVolumeExpansion().getType(), "volume expansion capability");
                    case TYPE_NOT_SET -> fail("a plugin capability without a type: " + capability);
                }
            }
        }

        @ParameterizedTest
        @EnumSource(Endpoint.class)
        void probeSucceedsAndTheDriverBecomesReady(Endpoint endpoint) throws InterruptedException {
            // Not ready is a valid answer while a driver starts, but not for long.
            long deadline = System.nanoTime() + 10_000_000_000L;
            ProbeResponse probe;
            do {
                probe = target.identity(endpoint).probe(ProbeRequest.getDefaultInstance());
                if (!probe.hasReady() || probe.getReady().getValue()) {
                    return;
                }
                Thread.sleep(100);
            } while (System.nanoTime() < deadline);
            fail("Probe still answers ready=false after 10s");
        }
    }

    /** What csi-sanity's GroupController specs check, once GROUP_CONTROLLER_SERVICE is advertised. */
    @Nested
    class GroupController {

        @Test
        void getCapabilitiesReturnsOnlyKnownCapabilities() {
            target.assume(csi.v1.Csi.PluginCapability.Service.Type.GROUP_CONTROLLER_SERVICE);
            var capabilities = target.groupController().groupControllerGetCapabilities(
                    csi.v1.Csi.GroupControllerGetCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList();
            for (var capability : capabilities) {
                assertTrue(capability.hasRpc(), "a group controller capability without an RPC type: " + capability);
                assertKnown(capability.getRpc().getType(), "group controller capability");
            }
        }

        @Test
        void missingIdsAreInvalidArgumentAnUnknownGroupIsNotFoundAndItsDeleteSucceeds() {
            target.assume(csi.v1.Csi.PluginCapability.Service.Type.GROUP_CONTROLLER_SERVICE);
            var groups = target.groupController();
            assertAll(
                    () -> assertCode(INVALID_ARGUMENT, "CreateVolumeGroupSnapshot without name",
                            () -> groups.createVolumeGroupSnapshot(csi.v1.Csi.CreateVolumeGroupSnapshotRequest.getDefaultInstance())),
                    () -> assertCode(INVALID_ARGUMENT, "GetVolumeGroupSnapshot without group_snapshot_id",
                            () -> groups.getVolumeGroupSnapshot(csi.v1.Csi.GetVolumeGroupSnapshotRequest.getDefaultInstance())),
                    () -> assertCode(NOT_FOUND, "GetVolumeGroupSnapshot of an id nobody handed out",
                            () -> groups.getVolumeGroupSnapshot(csi.v1.Csi.GetVolumeGroupSnapshotRequest.newBuilder()
                                    .setGroupSnapshotId("no-such-group-snapshot").build())),
                    () -> assertCode(INVALID_ARGUMENT, "DeleteVolumeGroupSnapshot without group_snapshot_id",
                            () -> groups.deleteVolumeGroupSnapshot(csi.v1.Csi.DeleteVolumeGroupSnapshotRequest.getDefaultInstance())),
                    () -> groups.deleteVolumeGroupSnapshot(csi.v1.Csi.DeleteVolumeGroupSnapshotRequest.newBuilder()
                            .setGroupSnapshotId("no-such-group-snapshot").build()));
        }
    }

    @Nested
    class Controller {

        @Test
        void getCapabilitiesReturnsOnlyKnownCapabilities() {
            target.assume(CONTROLLER_SERVICE);
            for (ControllerServiceCapability capability : target.controller()
                    .controllerGetCapabilities(ControllerGetCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList()) {
                assertTrue(capability.hasRpc(), "a controller capability without an RPC type: " + capability);
                assertKnown(capability.getRpc().getType(), "controller capability");
            }
        }

        @Test
        void createVolumeWithoutNameOrVolumeCapabilitiesIsInvalidArgument() {
            target.assume(CREATE_DELETE_VOLUME);
            CreateVolumeRequest request = newVolumeRequest("missing-field", target.accessType());
            assertAll(
                    () -> assertCode(INVALID_ARGUMENT, "CreateVolume without name",
                            () -> target.controller().createVolume(request.toBuilder().clearName().build())),
                    () -> assertCode(INVALID_ARGUMENT, "CreateVolume without volume_capabilities",
                            () -> target.controller().createVolume(request.toBuilder().clearVolumeCapabilities().build())));
        }

        @ParameterizedTest
        @MethodSource(ACCESS_TYPES)
        void createVolumeRepeatedReturnsTheSameVolume(AccessType type) {
            target.assume(CREATE_DELETE_VOLUME);
            CreateVolumeRequest request = newVolumeRequest("create-repeated", type);
            Volume volume = create(request);
            assertFalse(volume.getVolumeId().isEmpty(), "volume_id is required");
            // 0 is allowed: it says the capacity is unknown.
            assertTrue(volume.getCapacityBytes() == 0 || volume.getCapacityBytes() >= target.volumeBytes(),
                    "capacity_bytes " + volume.getCapacityBytes() + " is less than the required " + target.volumeBytes());
            assertAccessibleFromNode(volume);
            for (int i = 2; i <= REPEATS; i++) {
                Volume again = target.controller().createVolume(request).getVolume();
                assertEquals(volume.getVolumeId(), again.getVolumeId(), "volume_id of CreateVolume #" + i);
                assertEquals(volume.getCapacityBytes(), again.getCapacityBytes(), "capacity_bytes of CreateVolume #" + i);
            }
        }

        /** The volume was asked for with the node's topology as requisite, so the node must reach it. */
        void assertAccessibleFromNode(Volume volume) {
            // An empty accessible_topology means accessible from everywhere.
            if (!target.nodeInfo().hasAccessibleTopology() || volume.getAccessibleTopologyCount() == 0) {
                return;
            }
            var node = target.nodeInfo().getAccessibleTopology().getSegmentsMap().entrySet();
            assertTrue(volume.getAccessibleTopologyList().stream().anyMatch(t -> node.containsAll(t.getSegmentsMap().entrySet())),
                    "volume " + volume.getVolumeId() + " is accessible from " + volume.getAccessibleTopologyList()
                            + ", which does not include the node's topology " + target.nodeInfo().getAccessibleTopology());
        }

        @Test
        void createVolumeWithAnExistingNameAndAnotherCapacityIsAlreadyExists() {
            target.assume(CREATE_DELETE_VOLUME);
            long bytes = target.volumeBytes();
            // The limit keeps a driver from rounding the first volume up to the second size.
            CreateVolumeRequest request = newVolumeRequest("create-other-size", target.accessType()).toBuilder()
                    .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(bytes).setLimitBytes(bytes)).build();
            create(request);
            CreateVolumeRequest twice = request.toBuilder()
                    .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(2 * bytes).setLimitBytes(2 * bytes)).build();
            assertCode(ALREADY_EXISTS, "CreateVolume of an existing name with twice the capacity",
                    () -> cleanup.add(Requests.deleteVolume(target.controller().createVolume(twice).getVolume())));
        }

        @Test
        void createVolumeAcceptsANameOfTheMaximumLength() {
            target.assume(CREATE_DELETE_VOLUME);
            // CSI's general limit for a string field is 128 bytes; a driver must take that much.
            String name = (uniqueName("max-length") + "-" + "x".repeat(128)).substring(0, 128);
            Volume volume = create(Requests.createVolume(name, target.accessType(), target.volumeBytes(), target.accessibleFromNode()));
            assertFalse(volume.getVolumeId().isEmpty(), "volume_id is required");
        }

        @Test
        void deleteVolumeWithoutVolumeIdIsInvalidArgument() {
            target.assume(CREATE_DELETE_VOLUME);
            assertCode(INVALID_ARGUMENT, "DeleteVolume without volume_id",
                    () -> target.controller().deleteVolume(DeleteVolumeRequest.getDefaultInstance()));
        }

        @Test
        void deleteVolumeOfAMadeUpVolumeIdSucceeds() {
            target.assume(CREATE_DELETE_VOLUME);
            assertCode(OK, "DeleteVolume of a volume id never handed out",
                    () -> target.controller().deleteVolume(Requests.deleteVolume(Requests.volume(madeUpId("volume")))));
        }

        @Test
        void deleteVolumeRepeatedSucceeds() {
            target.assume(CREATE_DELETE_VOLUME);
            Volume volume = createVolume("delete-repeated", target.accessType());
            for (int i = 1; i <= REPEATS; i++) {
                assertCode(OK, "DeleteVolume #" + i, () -> target.controller().deleteVolume(Requests.deleteVolume(volume)));
            }
        }

        @Test
        void validateVolumeCapabilitiesWithoutVolumeIdOrCapabilitiesIsInvalidArgument() {
            target.assume(CREATE_DELETE_VOLUME);
            // A volume that exists: the driver cannot answer NOT_FOUND instead.
            ValidateVolumeCapabilitiesRequest request = Requests.validateVolumeCapabilities(
                    createVolume("validate-missing-field", target.accessType()), target.accessType());
            assertAll(
                    () -> assertCode(INVALID_ARGUMENT, "ValidateVolumeCapabilities without volume_id",
                            () -> target.controller().validateVolumeCapabilities(request.toBuilder().clearVolumeId().build())),
                    () -> assertCode(INVALID_ARGUMENT, "ValidateVolumeCapabilities without volume_capabilities",
                            () -> target.controller().validateVolumeCapabilities(request.toBuilder().clearVolumeCapabilities().build())));
        }

        @Test
        void validateVolumeCapabilitiesOfAnUnknownVolumeIsNotFound() {
            target.assume(CREATE_DELETE_VOLUME);
            for (String volumeId : List.of(madeUpId("volume"), deletedVolumeId())) {
                assertCode(NOT_FOUND, "ValidateVolumeCapabilities of " + volumeId, () -> target.controller()
                        .validateVolumeCapabilities(Requests.validateVolumeCapabilities(Requests.volume(volumeId), target.accessType())));
            }
        }

        @ParameterizedTest
        @MethodSource(ACCESS_TYPES)
        void validateVolumeCapabilitiesConfirmsTheCapabilityTheVolumeWasCreatedWith(AccessType type) {
            target.assume(CREATE_DELETE_VOLUME);
            Volume volume = createVolume("validate", type);
            ValidateVolumeCapabilitiesResponse response = target.controller()
                    .validateVolumeCapabilities(Requests.validateVolumeCapabilities(volume, type));
            assertTrue(response.hasConfirmed(), "not confirmed: " + response.getMessage());
            assertTrue(response.getConfirmed().getVolumeCapabilitiesList().contains(type.capability()),
                    "confirmed volume_capabilities " + response.getConfirmed().getVolumeCapabilitiesList() + " lack " + type.capability());
        }

        @Test
        void controllerPublishVolumeWithoutARequiredFieldIsInvalidArgument() {
            target.assume(PUBLISH_UNPUBLISH_VOLUME);
            ControllerPublishVolumeRequest request = Requests.controllerPublishVolume(
                    Requests.volume(madeUpId("volume")), madeUpId("node"), target.accessType());
            assertAll(
                    () -> assertCode(INVALID_ARGUMENT, "ControllerPublishVolume without volume_id",
                            () -> target.controller().controllerPublishVolume(request.toBuilder().clearVolumeId().build())),
                    () -> assertCode(INVALID_ARGUMENT, "ControllerPublishVolume without node_id",
                            () -> target.controller().controllerPublishVolume(request.toBuilder().clearNodeId().build())),
                    () -> assertCode(INVALID_ARGUMENT, "ControllerPublishVolume without volume_capability",
                            () -> target.controller().controllerPublishVolume(request.toBuilder().clearVolumeCapability().build())));
        }

        @Test
        void controllerPublishVolumeOfAnUnknownVolumeIsNotFound() {
            target.assume(PUBLISH_UNPUBLISH_VOLUME);
            target.assume(CREATE_DELETE_VOLUME);
            // To the real node, where only the volume is unknown, and to a made-up node as well.
            for (String nodeId : List.of(target.nodeId(), madeUpId("node"))) {
                for (String volumeId : List.of(madeUpId("volume"), deletedVolumeId())) {
                    assertCode(NOT_FOUND, "ControllerPublishVolume of " + volumeId + " to node " + nodeId, () -> target.controller()
                            .controllerPublishVolume(Requests.controllerPublishVolume(Requests.volume(volumeId), nodeId, target.accessType())));
                }
            }
        }

        @Test
        void controllerPublishVolumeToAnUnknownNodeIsNotFound() {
            target.assume(PUBLISH_UNPUBLISH_VOLUME);
            target.assume(CREATE_DELETE_VOLUME);
            Volume volume = createVolume("publish-unknown-node", target.accessType());
            String nodeId = madeUpId("node");
            assertCode(NOT_FOUND, "ControllerPublishVolume to node " + nodeId, () -> {
                target.controller().controllerPublishVolume(Requests.controllerPublishVolume(volume, nodeId, target.accessType()));
                cleanup.add(Requests.controllerUnpublishVolume(volume, nodeId));
            });
        }

        @Test
        void controllerPublishVolumeRepeatedReturnsTheSamePublishContext() {
            target.assume(PUBLISH_UNPUBLISH_VOLUME);
            target.assume(CREATE_DELETE_VOLUME);
            Volume volume = createVolume("publish-repeated", target.accessType());
            Map<String, String> publishContext = controllerPublish(volume, target.accessType());
            for (int i = 2; i <= REPEATS; i++) {
                assertEquals(publishContext, target.controller().controllerPublishVolume(
                        Requests.controllerPublishVolume(volume, target.nodeId(), target.accessType())).getPublishContextMap(),
                        "publish_context of ControllerPublishVolume #" + i);
            }
        }

        @Test
        void controllerUnpublishVolumeWithoutVolumeIdIsInvalidArgument() {
            target.assume(PUBLISH_UNPUBLISH_VOLUME);
            assertCode(INVALID_ARGUMENT, "ControllerUnpublishVolume without volume_id", () -> target.controller()
                    .controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder().setNodeId(target.nodeId()).build()));
        }

        @Test
        void controllerUnpublishVolumeRepeatedSucceeds() {
            target.assume(PUBLISH_UNPUBLISH_VOLUME);
            target.assume(CREATE_DELETE_VOLUME);
            Volume volume = createVolume("unpublish-repeated", target.accessType());
            controllerPublish(volume, target.accessType());
            ControllerUnpublishVolumeRequest unpublish = Requests.controllerUnpublishVolume(volume, target.nodeId());
            cleanup.undo(unpublish);
            for (int i = 2; i <= REPEATS; i++) {
                assertCode(OK, "ControllerUnpublishVolume #" + i, () -> target.controller().controllerUnpublishVolume(unpublish));
            }
        }

        @Test
        void listVolumesWithAStartingTokenNotHandedOutIsAborted() {
            target.assume(LIST_VOLUMES);
            assertCode(ABORTED, "ListVolumes from a made-up starting_token", () -> target.controller()
                    .listVolumes(ListVolumesRequest.newBuilder().setStartingToken(madeUpId("token")).build()));
        }

        @Test
        void listVolumesShowsANewVolumeAndNotADeletedOne() {
            target.assume(LIST_VOLUMES);
            target.assume(CREATE_DELETE_VOLUME);
            List<String> before = listVolumeIds(0);
            Volume volume = createVolume("listed", target.accessType());
            List<String> during = listVolumeIds(0);
            assertTrue(during.contains(volume.getVolumeId()), "new volume " + volume.getVolumeId() + " not listed: " + during);
            assertEquals(before.size() + 1, during.size(), "one volume more than before: " + during);
            cleanup.undo(Requests.deleteVolume(volume));
            List<String> after = listVolumeIds(0);
            assertFalse(after.contains(volume.getVolumeId()), "deleted volume " + volume.getVolumeId() + " still listed");
            assertEquals(before.size(), after.size(), "as many volumes as before: " + after);
        }

        @Test
        void listVolumesInPagesReturnsEveryVolumeExactlyOnce() {
            target.assume(LIST_VOLUMES);
            target.assume(CREATE_DELETE_VOLUME);
            int maxEntries = 2;
            List<String> created = new ArrayList<>();
            for (int i = 0; i < maxEntries + 1; i++) {
                created.add(createVolume("paged", target.accessType()).getVolumeId());
            }
            List<String> all = listVolumeIds(0);
            assertTrue(all.containsAll(created), "created " + created + ", listed " + all);

            ListVolumesResponse first = listVolumes(maxEntries, "");
            assertFalse(first.getNextToken().isEmpty(), "more volumes than max_entries, but no next_token");
            List<String> paged = listVolumeIds(maxEntries);
            assertEquals(paged.size(), new HashSet<>(paged).size(), "a volume listed on two pages: " + paged);
            assertEquals(Set.copyOf(all), Set.copyOf(paged), "pages of " + maxEntries + " list other volumes than one page");
        }

        ListVolumesResponse listVolumes(int maxEntries, String startingToken) {
            ListVolumesResponse page = target.controller().listVolumes(
                    ListVolumesRequest.newBuilder().setMaxEntries(maxEntries).setStartingToken(startingToken).build());
            if (maxEntries > 0) {
                assertTrue(page.getEntriesCount() <= maxEntries, page.getEntriesCount() + " entries, max_entries " + maxEntries);
            }
            page.getEntriesList().forEach(entry -> assertFalse(entry.getVolume().getVolumeId().isEmpty(), "a volume without volume_id"));
            return page;
        }

        /** Every volume id, page by page until next_token is empty (a driver may page even when not asked to). */
        List<String> listVolumeIds(int maxEntries) {
            List<String> ids = new ArrayList<>();
            String token = "";
            for (int pages = 1; ; pages++) {
                ListVolumesResponse page = listVolumes(maxEntries, token);
                page.getEntriesList().forEach(entry -> ids.add(entry.getVolume().getVolumeId()));
                token = page.getNextToken();
                if (token.isEmpty()) {
                    return ids;
                }
                assertTrue(pages < 1000, "next_token still set after 1000 pages");
            }
        }

        @Test
        void getCapacityIsNeverNegative() {
            target.assume(GET_CAPACITY);
            for (GetCapacityRequest request : List.of(GetCapacityRequest.getDefaultInstance(),
                    GetCapacityRequest.newBuilder().addVolumeCapabilities(target.accessType().capability()).build())) {
                GetCapacityResponse response = target.controller().getCapacity(request);
                assertTrue(response.getAvailableCapacity() >= 0, "available_capacity " + response.getAvailableCapacity());
                assertTrue(response.getMaximumVolumeSize().getValue() >= 0, "maximum_volume_size " + response.getMaximumVolumeSize());
            }
        }

        @Test
        void getCapacityOfTheNodesTopologyIsPositive() {
            target.assume(GET_CAPACITY);
            target.assume(VOLUME_ACCESSIBILITY_CONSTRAINTS);
            Topology node = target.nodeInfo().getAccessibleTopology();
            GetCapacityResponse response = target.controller().getCapacity(GetCapacityRequest.newBuilder()
                    .addVolumeCapabilities(target.accessType().capability()).setAccessibleTopology(node).build());
            // The suite creates its volumes there, so there must be room.
            assertTrue(response.getAvailableCapacity() > 0, "no capacity in the node's topology " + node);
        }
    }

    /**
     * csi-sanity's "ModifyVolume [Controller Server]" specs and its two CreateVolume specs with a
     * volume attribute class. Its TestVolumeMutableParameters (a file it is given) are, against our
     * driver, an IO limit; against another driver none, csi-sanity's default.
     */
    @Nested
    class ModifyVolume {

        Map<String, String> mutableParameters() {
            return ConformanceTarget.external() ? Map.of() : Map.of("writeIOPS", "1000");
        }

        static final Map<String, String> FAKE = Map.of("XXX_FakeKey", "XXX_FakeValue");

        ControllerModifyVolumeRequest modify(String volumeId, Map<String, String> parameters) {
            return ControllerModifyVolumeRequest.newBuilder().setVolumeId(volumeId).putAllMutableParameters(parameters).build();
        }

        @Test
        void createVolumeWithAVolumeAttributeClass() {
            target.assume(MODIFY_VOLUME);
            create(newVolumeRequest("with-mutable-parameters", target.accessType()).toBuilder()
                    .putAllMutableParams(mutableParameters()).build());
        }

        @Test
        void createVolumeWithAnInvalidVolumeAttributeClassIsInvalidArgument() {
            target.assume(MODIFY_VOLUME);
            CreateVolumeRequest request = newVolumeRequest("with-fake-mutable-parameters", target.accessType()).toBuilder()
                    .putAllMutableParams(FAKE).build();
            assertCode(INVALID_ARGUMENT, "CreateVolume with an unknown mutable parameter", () -> {
                var volume = target.controller().createVolume(request).getVolume();
                cleanup.add(Requests.deleteVolume(volume));
            });
        }

        @Test
        void modifyWithoutVolumeIdIsInvalidArgumentAndOfAVolumeNobodyKnowsNotFound() {
            target.assume(MODIFY_VOLUME);
            assertCode(INVALID_ARGUMENT, "ControllerModifyVolume without volume_id",
                    () -> target.controller().controllerModifyVolume(modify("", mutableParameters())));
            assertCode(NOT_FOUND, "ControllerModifyVolume of a volume that does not exist",
                    () -> target.controller().controllerModifyVolume(modify("non-existing-volume-id", mutableParameters())));
        }

        @Test
        void modifyAVolumeCreatedWithoutAndWithAVolumeAttributeClass() {
            target.assume(MODIFY_VOLUME);
            Volume without = createVolume("modify", target.accessType());
            target.controller().controllerModifyVolume(modify(without.getVolumeId(), mutableParameters()));
            Volume with = create(newVolumeRequest("modify-with-vac", target.accessType()).toBuilder()
                    .putAllMutableParams(mutableParameters()).build());
            for (int i = 1; i <= REPEATS; i++) {
                target.controller().controllerModifyVolume(modify(with.getVolumeId(), mutableParameters()));
            }
        }

        @Test
        void modifyWithMutableParametersTheVolumeDoesNotSupportIsInvalidArgument() {
            target.assume(MODIFY_VOLUME);
            Volume without = createVolume("modify-unsupported", target.accessType());
            assertCode(INVALID_ARGUMENT, "ControllerModifyVolume with an unknown mutable parameter",
                    () -> target.controller().controllerModifyVolume(modify(without.getVolumeId(), FAKE)));
            Volume with = create(newVolumeRequest("modify-with-vac-unsupported", target.accessType()).toBuilder()
                    .putAllMutableParams(mutableParameters()).build());
            assertCode(INVALID_ARGUMENT, "ControllerModifyVolume of a volume made with a class, with an unknown mutable parameter",
                    () -> target.controller().controllerModifyVolume(modify(with.getVolumeId(), FAKE)));
        }
    }

    @Nested
    class Node {

        @Test
        void getCapabilitiesReturnsOnlyKnownCapabilities() {
            for (NodeServiceCapability capability : target.node()
                    .nodeGetCapabilities(NodeGetCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList()) {
                assertTrue(capability.hasRpc(), "a node capability without an RPC type: " + capability);
                assertKnown(capability.getRpc().getType(), "node capability");
            }
        }

        @Test
        void nodeGetInfoReturnsANodeIdAndNoNegativeVolumeLimit() {
            NodeGetInfoResponse info = target.nodeInfo();
            assertFalse(info.getNodeId().isEmpty(), "node_id is required");
            assertTrue(info.getNodeId().getBytes(StandardCharsets.UTF_8).length <= 256, "node_id longer than 256 bytes");
            assertTrue(info.getMaxVolumesPerNode() >= 0, "max_volumes_per_node " + info.getMaxVolumesPerNode());
        }

        @Test
        void nodeGetInfoReportsTopologyExactlyWhenAccessibilityConstraintsAreAdvertised() {
            NodeGetInfoResponse info = target.nodeInfo();
            if (target.advertises(VOLUME_ACCESSIBILITY_CONSTRAINTS)) {
                assertTrue(info.getAccessibleTopology().getSegmentsCount() > 0,
                        "VOLUME_ACCESSIBILITY_CONSTRAINTS is advertised, but the node reports no accessible_topology");
            } else {
                assertFalse(info.hasAccessibleTopology(),
                        "accessible_topology reported without the VOLUME_ACCESSIBILITY_CONSTRAINTS plugin capability");
            }
        }

        @Test
        void nodeStageVolumeWithoutARequiredFieldIsInvalidArgument() throws Exception {
            target.assume(STAGE_UNSTAGE_VOLUME);
            // A made-up volume: the fields are checked before the volume is looked up.
            NodeStageVolumeRequest request = Requests.nodeStageVolume(
                    Requests.volume(madeUpId("volume")), target.accessType(), target.newStagingPath(), Map.of());
            assertAll(
                    () -> assertCode(INVALID_ARGUMENT, "NodeStageVolume without volume_id",
                            () -> target.node().nodeStageVolume(request.toBuilder().clearVolumeId().build())),
                    () -> assertCode(INVALID_ARGUMENT, "NodeStageVolume without staging_target_path",
                            () -> target.node().nodeStageVolume(request.toBuilder().clearStagingTargetPath().build())),
                    () -> assertCode(INVALID_ARGUMENT, "NodeStageVolume without volume_capability",
                            () -> target.node().nodeStageVolume(request.toBuilder().clearVolumeCapability().build())));
        }

        @Test
        void nodeUnstageVolumeWithoutARequiredFieldIsInvalidArgument() throws Exception {
            target.assume(STAGE_UNSTAGE_VOLUME);
            NodeUnstageVolumeRequest request = Requests.nodeUnstageVolume(Requests.volume(madeUpId("volume")), target.newStagingPath());
            assertAll(
                    () -> assertCode(INVALID_ARGUMENT, "NodeUnstageVolume without volume_id",
                            () -> target.node().nodeUnstageVolume(request.toBuilder().clearVolumeId().build())),
                    () -> assertCode(INVALID_ARGUMENT, "NodeUnstageVolume without staging_target_path",
                            () -> target.node().nodeUnstageVolume(request.toBuilder().clearStagingTargetPath().build())));
        }

        @Test
        void nodePublishVolumeWithoutARequiredFieldIsInvalidArgument() throws Exception {
            NodePublishVolumeRequest request = Requests.nodePublishVolume(Requests.volume(madeUpId("volume")), target.accessType(),
                    target.advertises(STAGE_UNSTAGE_VOLUME) ? target.newStagingPath() : null, target.newTargetPath(), Map.of());
            assertAll(
                    () -> assertCode(INVALID_ARGUMENT, "NodePublishVolume without volume_id",
                            () -> target.node().nodePublishVolume(request.toBuilder().clearVolumeId().build())),
                    () -> assertCode(INVALID_ARGUMENT, "NodePublishVolume without target_path",
                            () -> target.node().nodePublishVolume(request.toBuilder().clearTargetPath().build())),
                    () -> assertCode(INVALID_ARGUMENT, "NodePublishVolume without volume_capability",
                            () -> target.node().nodePublishVolume(request.toBuilder().clearVolumeCapability().build())),
                    () -> {
                        // Required exactly when the node stages.
                        if (target.advertises(STAGE_UNSTAGE_VOLUME)) {
                            assertCode(INVALID_ARGUMENT, "NodePublishVolume without staging_target_path",
                                    () -> target.node().nodePublishVolume(request.toBuilder().clearStagingTargetPath().build()));
                        }
                    });
        }

        @Test
        void nodeUnpublishVolumeWithoutARequiredFieldIsInvalidArgument() throws Exception {
            NodeUnpublishVolumeRequest request = Requests.nodeUnpublishVolume(Requests.volume(madeUpId("volume")), target.newTargetPath());
            assertAll(
                    () -> assertCode(INVALID_ARGUMENT, "NodeUnpublishVolume without volume_id",
                            () -> target.node().nodeUnpublishVolume(request.toBuilder().clearVolumeId().build())),
                    () -> assertCode(INVALID_ARGUMENT, "NodeUnpublishVolume without target_path",
                            () -> target.node().nodeUnpublishVolume(request.toBuilder().clearTargetPath().build())));
        }

        @Test
        void nodeGetVolumeStatsWithoutARequiredFieldIsInvalidArgument() throws Exception {
            target.assume(GET_VOLUME_STATS);
            NodeGetVolumeStatsRequest request = NodeGetVolumeStatsRequest.newBuilder()
                    .setVolumeId(madeUpId("volume")).setVolumePath(target.unrelatedDirectory().toString()).build();
            assertAll(
                    () -> assertCode(INVALID_ARGUMENT, "NodeGetVolumeStats without volume_id",
                            () -> target.node().nodeGetVolumeStats(request.toBuilder().clearVolumeId().build())),
                    () -> assertCode(INVALID_ARGUMENT, "NodeGetVolumeStats without volume_path",
                            () -> target.node().nodeGetVolumeStats(request.toBuilder().clearVolumePath().build())));
        }

        @Test
        void nodeGetVolumeStatsOfAnUnknownVolumeIsNotFound() throws Exception {
            target.assume(GET_VOLUME_STATS);
            NodeGetVolumeStatsRequest request = NodeGetVolumeStatsRequest.newBuilder()
                    .setVolumeId(madeUpId("volume")).setVolumePath(target.unrelatedDirectory().toString()).build();
            assertCode(NOT_FOUND, "NodeGetVolumeStats of a made-up volume", () -> target.node().nodeGetVolumeStats(request));
        }

        @Test
        void nodeUnpublishAndNodeUnstageOfAVolumeNeverPublishedSucceedOrAreNotFound() throws Exception {
            // NOT_FOUND is the spec's answer for a volume that does not exist; OK is what idempotency gives.
            Set<Status.Code> okOrNotFound = Set.of(OK, NOT_FOUND);
            List<Volume> volumes = new ArrayList<>(List.of(Requests.volume(madeUpId("volume"))));
            if (target.advertises(CREATE_DELETE_VOLUME)) {
                Volume volume = createVolume("never-published", target.accessType());
                controllerPublish(volume, target.accessType());
                volumes.add(volume);
            }
            for (Volume volume : volumes) {
                Path targetPath = target.newTargetPath();
                assertCodeIn(okOrNotFound, "NodeUnpublishVolume of " + volume.getVolumeId(),
                        () -> target.node().nodeUnpublishVolume(Requests.nodeUnpublishVolume(volume, targetPath)));
                assertFalse(Files.exists(targetPath, LinkOption.NOFOLLOW_LINKS), "NodeUnpublishVolume made " + targetPath);
                if (target.advertises(STAGE_UNSTAGE_VOLUME)) {
                    Path stagingPath = target.newStagingPath();
                    assertCodeIn(okOrNotFound, "NodeUnstageVolume of " + volume.getVolumeId(),
                            () -> target.node().nodeUnstageVolume(Requests.nodeUnstageVolume(volume, stagingPath)));
                }
            }
        }

        @ParameterizedTest
        @MethodSource(ACCESS_TYPES)
        void nodeUnpublishVolumeRemovesTheTargetPath(AccessType type) throws Exception {
            target.assume(CREATE_DELETE_VOLUME);
            Published published = createAndPublish("unpublish", type);
            assertTrue(Files.exists(published.targetPath(), LinkOption.NOFOLLOW_LINKS), "NodePublishVolume made no target_path");
            cleanup.undo(Requests.nodeUnpublishVolume(published.volume(), published.targetPath()));
            assertFalse(Files.exists(published.targetPath(), LinkOption.NOFOLLOW_LINKS),
                    "NodeUnpublishVolume must delete the target_path it created");
        }

        @ParameterizedTest
        @MethodSource(ACCESS_TYPES)
        void nodeGetVolumeStatsReportsUsageAtThePublishedPathOnly(AccessType type) throws Exception {
            target.assume(GET_VOLUME_STATS);
            target.assume(CREATE_DELETE_VOLUME);
            Published published = createAndPublish("stats", type);
            NodeGetVolumeStatsRequest request = NodeGetVolumeStatsRequest.newBuilder()
                    .setVolumeId(published.volume().getVolumeId()).setVolumePath(published.targetPath().toString()).build();
            NodeGetVolumeStatsResponse stats = target.node().nodeGetVolumeStats(request);
            assertFalse(stats.getUsageList().isEmpty(), "no usage for a published volume");
            for (VolumeUsage usage : stats.getUsageList()) {
                assertKnown(usage.getUnit(), "usage unit");
                assertTrue(usage.getTotal() >= 0 && usage.getUsed() >= 0 && usage.getAvailable() >= 0, "negative usage: " + usage);
                // Whatever is measured is on the volume, so it cannot be larger than the volume.
                long capacity = published.volume().getCapacityBytes();
                if (usage.getUnit() == VolumeUsage.Unit.BYTES && capacity > 0) {
                    assertTrue(usage.getTotal() <= capacity, "total " + usage.getTotal() + " bytes on a volume of " + capacity);
                }
            }
            // Not the volume's path: another directory, a path that does not exist, a relative path (csi-sanity sends one).
            String absent = published.targetPath().resolveSibling("absent").toString();
            for (String elsewhere : List.of(target.unrelatedDirectory().toString(), absent, "some/path")) {
                assertCode(NOT_FOUND, "NodeGetVolumeStats at " + elsewhere, () -> target.node()
                        .nodeGetVolumeStats(request.toBuilder().setVolumePath(elsewhere).build()));
            }
        }

        @ParameterizedTest
        @MethodSource(ACCESS_TYPES)
        void nodeStageVolumeAndNodePublishVolumeRepeatedSucceed(AccessType type) throws Exception {
            target.assume(CREATE_DELETE_VOLUME);
            Volume volume = createVolume("node-repeated", type);
            Map<String, String> publishContext = controllerPublish(volume, type);
            Path stagingPath = null;
            if (target.advertises(STAGE_UNSTAGE_VOLUME)) {
                stagingPath = target.newStagingPath();
                NodeStageVolumeRequest stage = Requests.nodeStageVolume(volume, type, stagingPath, publishContext);
                target.node().nodeStageVolume(stage);
                cleanup.add(Requests.nodeUnstageVolume(volume, stagingPath));
                for (int i = 2; i <= REPEATS; i++) {
                    assertCode(OK, "NodeStageVolume #" + i, () -> target.node().nodeStageVolume(stage));
                }
            }
            Path targetPath = target.newTargetPath();
            NodePublishVolumeRequest publish = Requests.nodePublishVolume(volume, type, stagingPath, targetPath, publishContext);
            target.node().nodePublishVolume(publish);
            cleanup.add(Requests.nodeUnpublishVolume(volume, targetPath));
            for (int i = 2; i <= REPEATS; i++) {
                assertCode(OK, "NodePublishVolume #" + i, () -> target.node().nodePublishVolume(publish));
            }
            if (target.seesDriverMounts()) {
                // Same mount namespace as the local driver: one mount, not one per call.
                assertEquals(List.of(targetPath), SystemState.mountsUnder(targetPath), "mounts at the target_path");
            }
        }

        @ParameterizedTest
        @MethodSource(ACCESS_TYPES)
        void volumeGoesThroughTheWholeLifecycle(AccessType type) throws Exception {
            target.assume(CREATE_DELETE_VOLUME);
            Volume volume = createVolume("lifecycle", type);
            Map<String, String> publishContext = controllerPublish(volume, type);
            Path stagingPath = stage(volume, type, publishContext);
            Path targetPath = publish(volume, type, stagingPath, publishContext);
            assertTrue(Files.exists(targetPath, LinkOption.NOFOLLOW_LINKS), "no target_path after NodePublishVolume");
            if (target.seesDriverMounts()) {
                assertTrue(SystemState.mountAt(targetPath).isPresent(), "nothing mounted at the target_path");
            }

            cleanup.undo(Requests.nodeUnpublishVolume(volume, targetPath));
            assertFalse(Files.exists(targetPath, LinkOption.NOFOLLOW_LINKS), "target_path left after NodeUnpublishVolume");
            if (stagingPath != null) {
                cleanup.undo(Requests.nodeUnstageVolume(volume, stagingPath));
                if (target.seesDriverMounts()) {
                    assertTrue(SystemState.mountAt(stagingPath).isEmpty(), "still mounted at the staging_target_path");
                }
            }
            if (target.advertises(PUBLISH_UNPUBLISH_VOLUME)) {
                cleanup.undo(Requests.controllerUnpublishVolume(volume, target.nodeId()));
            }
            cleanup.undo(Requests.deleteVolume(volume));
            assertCode(NOT_FOUND, "ValidateVolumeCapabilities after DeleteVolume", () -> target.controller()
                    .validateVolumeCapabilities(Requests.validateVolumeCapabilities(volume, type)));
        }
    }
}
