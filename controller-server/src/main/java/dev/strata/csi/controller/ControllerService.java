package dev.strata.csi.controller;

import csi.v1.ControllerGrpc;
import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerExpandVolumeRequest;
import csi.v1.Csi.ControllerExpandVolumeResponse;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import csi.v1.Csi.ControllerGetCapabilitiesResponse;
import csi.v1.Csi.ControllerGetVolumeRequest;
import csi.v1.Csi.ControllerGetVolumeResponse;
import csi.v1.Csi.ControllerModifyVolumeRequest;
import csi.v1.Csi.ControllerModifyVolumeResponse;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerPublishVolumeResponse;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeResponse;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateSnapshotResponse;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.CreateVolumeResponse;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteSnapshotResponse;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.DeleteVolumeResponse;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.GetCapacityResponse;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.ListSnapshotsResponse;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.ValidateVolumeCapabilitiesRequest;
import csi.v1.Csi.ValidateVolumeCapabilitiesResponse;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.controller.backend.ControllerBackends;
import dev.strata.csi.controller.backend.CreateChecks;
import dev.strata.csi.controller.backend.SnapshotFilter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import dev.strata.csi.rpc.VolumeLocks;
import io.grpc.stub.StreamObserver;
import java.util.List;
import java.util.Optional;

/**
 * The CSI Controller service. Each call checks its request, chooses the backend once
 * ({@link ControllerBackends}: by the StorageClass parameters for a new volume, by the volume id's
 * scheme or a static volume's context for an existing one), takes the volume's lock and
 * delegates; what a volume can be is the backend's answer too. It keeps no state of its own.
 */
public final class ControllerService extends ControllerGrpc.ControllerImplBase {

    private final AgentDirectory agents;
    private final ControllerBackends backends;
    private final VolumeLocks locks = new VolumeLocks();

    /** @param agents the registered node agents: a volume is published only to a node known to have one */
    public ControllerService(AgentDirectory agents, ControllerBackends backends) {
        this.agents = agents;
        this.backends = backends;
    }

    @Override
    public void createVolume(CreateVolumeRequest request, StreamObserver<CreateVolumeResponse> response) {
        Rpc.answer(response, () -> {
            var creation = backends.forCreate(request);
            try (var held = locks.acquire(creation.lockKey())) {
                Volume volume = creation.create();
                if (request.hasVolumeContentSource()) { // the backend made it from this source, or refused
                    volume = volume.toBuilder().setContentSource(request.getVolumeContentSource()).build();
                }
                return CreateVolumeResponse.newBuilder().setVolume(volume).build();
            }
        });
    }

    @Override
    public void deleteVolume(DeleteVolumeRequest request, StreamObserver<DeleteVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            var volume = backends.provisioned(request.getVolumeId());
            if (volume.isPresent()) { // an id this driver never handed out names nothing to delete
                try (var held = locks.acquire(volume.get().lockKey())) {
                    volume.get().delete();
                }
            }
            return DeleteVolumeResponse.getDefaultInstance();
        });
    }

    @Override
    public void controllerExpandVolume(ControllerExpandVolumeRequest request, StreamObserver<ControllerExpandVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            if (!request.hasCapacityRange()) {
                throw CsiException.missing("capacity_range");
            }
            CapacityRange range = request.getCapacityRange();
            CreateChecks.range(range);
            long bytes = range.getRequiredBytes() > 0 ? range.getRequiredBytes() : range.getLimitBytes();
            if (bytes == 0) {
                throw CsiException.invalidArgument("capacity_range gives neither required_bytes nor limit_bytes");
            }
            var volume = backends.provisioned(request.getVolumeId()).orElseThrow(() -> CsiException.notFound(
                    "volume " + CsiException.printable(request.getVolumeId()) + " does not exist"));
            Optional<VolumeCapability> capability = request.hasVolumeCapability()
                    ? Optional.of(request.getVolumeCapability()) : Optional.empty();
            capability.ifPresent(given -> volume.capabilities().require(List.of(given), "volume_capability"));
            try (var held = locks.acquire(volume.lockKey())) {
                var expansion = volume.expand(bytes, capability);
                if (range.getLimitBytes() > 0 && expansion.capacityBytes() > range.getLimitBytes()) {
                    throw CsiException.outOfRange("volume " + request.getVolumeId() + " has " + expansion.capacityBytes()
                            + " bytes, above capacity_range limit_bytes " + range.getLimitBytes());
                }
                return ControllerExpandVolumeResponse.newBuilder().setCapacityBytes(expansion.capacityBytes())
                        .setNodeExpansionRequired(expansion.nodeExpansionRequired()).build();
            }
        });
    }

    /**
     * Changes what the mutable parameters (a VolumeAttributesClass's) name, for a volume that may be
     * in use; INVALID_ARGUMENT for a parameter the volume's backend does not take (external-resizer
     * marks the claim's modification infeasible).
     */
    @Override
    public void controllerModifyVolume(ControllerModifyVolumeRequest request, StreamObserver<ControllerModifyVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            var volume = backends.provisioned(request.getVolumeId()).orElseThrow(() -> CsiException.notFound(
                    "volume " + CsiException.printable(request.getVolumeId()) + " does not exist"));
            volume.backend().checkMutableParameters(request.getMutableParametersMap());
            try (var held = locks.acquire(volume.lockKey())) {
                volume.modify(request.getMutableParametersMap());
                return ControllerModifyVolumeResponse.getDefaultInstance();
            }
        });
    }

    @Override
    public void controllerPublishVolume(ControllerPublishVolumeRequest request,
            StreamObserver<ControllerPublishVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            if (request.getNodeId().isEmpty()) {
                throw CsiException.missing("node_id");
            }
            if (!request.hasVolumeCapability()) {
                throw CsiException.missing("volume_capability");
            }
            var volume = backends.withContext(request.getVolumeId(), request.getVolumeContextMap());
            volume.requireKnownContext(request.getVolumeContextMap());
            volume.capabilities().require(List.of(request.getVolumeCapability()), "volume_capability");
            agents.requireKnown(request.getNodeId(),
                    "node " + CsiException.printable(request.getNodeId()) + " is not known: no node agent registered for it");
            try (var held = locks.acquire(volume.lockKey())) {
                return ControllerPublishVolumeResponse.newBuilder()
                        .putAllPublishContext(volume.publish(request.getNodeId(), request.getVolumeCapability()))
                        .build();
            }
        });
    }

    @Override
    public void controllerUnpublishVolume(ControllerUnpublishVolumeRequest request,
            StreamObserver<ControllerUnpublishVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            var volume = backends.withoutContext(request.getVolumeId());
            if (volume.isPresent()) { // unknown volume: it is not published anywhere
                try (var held = locks.acquire(volume.get().lockKey())) {
                    volume.get().unpublish(request.getNodeId());
                }
            }
            return ControllerUnpublishVolumeResponse.getDefaultInstance();
        });
    }

    @Override
    public void validateVolumeCapabilities(ValidateVolumeCapabilitiesRequest request,
            StreamObserver<ValidateVolumeCapabilitiesResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            if (request.getVolumeCapabilitiesCount() == 0) {
                throw CsiException.missing("volume_capabilities");
            }
            var volume = backends.withContext(request.getVolumeId(), request.getVolumeContextMap());
            var problem = volume.validate(request.getParametersMap()); // NOT_FOUND first
            if (problem.isEmpty()) {
                problem = volume.backend().volumeContextKeys().problem(request.getVolumeContextMap());
            }
            if (problem.isPresent()) {
                return ValidateVolumeCapabilitiesResponse.newBuilder().setMessage(problem.get()).build();
            }
            for (var capability : request.getVolumeCapabilitiesList()) {
                var reason = volume.capabilities().unsupported(capability);
                if (reason.isPresent()) {
                    return ValidateVolumeCapabilitiesResponse.newBuilder().setMessage(reason.get()).build();
                }
            }
            return ValidateVolumeCapabilitiesResponse.newBuilder()
                    .setConfirmed(ValidateVolumeCapabilitiesResponse.Confirmed.newBuilder()
                            .putAllVolumeContext(request.getVolumeContextMap())
                            .addAllVolumeCapabilities(request.getVolumeCapabilitiesList())
                            .putAllParameters(request.getParametersMap()))
                    .build();
        });
    }

    @Override
    public void listVolumes(ListVolumesRequest request, StreamObserver<ListVolumesResponse> response) {
        Rpc.answer(response, () -> {
            Pages.checkToken(request.getMaxEntries(), request.getStartingToken());
            var page = Pages.page(request.getMaxEntries(), request.getStartingToken(), backends::list,
                    entry -> entry.getVolume().getVolumeId());
            return ListVolumesResponse.newBuilder().addAllEntries(page.entries()).setNextToken(page.nextToken()).build();
        });
    }

    /** The volume as ListVolumes lists it, with the nodes it is published to; NOT_FOUND when it does not exist. */
    @Override
    public void controllerGetVolume(ControllerGetVolumeRequest request, StreamObserver<ControllerGetVolumeResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_id");
            }
            var notFound = CsiException.notFound("volume " + CsiException.printable(request.getVolumeId()) + " does not exist");
            var volume = backends.provisioned(request.getVolumeId()).orElseThrow(() -> notFound);
            var entry = volume.get(request.getVolumeId()).orElseThrow(() -> notFound);
            return ControllerGetVolumeResponse.newBuilder().setVolume(entry.getVolume())
                    .setStatus(ControllerGetVolumeResponse.VolumeStatus.newBuilder()
                            .addAllPublishedNodeIds(entry.getStatus().getPublishedNodeIdsList()))
                    .build();
        });
    }

    @Override
    public void getCapacity(GetCapacityRequest request, StreamObserver<GetCapacityResponse> response) {
        Rpc.answer(response, () -> {
            var backend = backends.forParameters(request.getParametersMap());
            for (var capability : request.getVolumeCapabilitiesList()) {
                // external-provisioner's capacity controller asks with access mode UNKNOWN, meaning any:
                // then only the access type (mount or block, the filesystem) is asked about.
                if (capability.getAccessMode().getMode() == VolumeCapability.AccessMode.Mode.UNKNOWN) {
                    capability = capability.toBuilder().setAccessMode(VolumeCapability.AccessMode.newBuilder()
                            .setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)).build();
                }
                if (backend.capabilities().unsupported(capability).isPresent()) {
                    return GetCapacityResponse.getDefaultInstance();
                }
            }
            long available = backend.availableBytes(request);
            return GetCapacityResponse.newBuilder()
                    .setAvailableCapacity(available)
                    .setMaximumVolumeSize(com.google.protobuf.Int64Value.of(available))
                    .build();
        });
    }

    @Override
    public void createSnapshot(CreateSnapshotRequest request, StreamObserver<CreateSnapshotResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getName().isEmpty()) {
                throw CsiException.missing("name");
            }
            if (request.getSourceVolumeId().isEmpty()) {
                throw CsiException.missing("source_volume_id");
            }
            var source = backends.provisioned(request.getSourceVolumeId()).orElseThrow(() -> CsiException.notFound(
                    "source volume " + CsiException.printable(request.getSourceVolumeId()) + " does not exist"));
            try (var held = locks.acquire(snapshotLockKey(request.getName()))) {
                return CreateSnapshotResponse.newBuilder()
                        .setSnapshot(source.createSnapshot(request.getName(), request.getParametersMap())).build();
            }
        });
    }

    @Override
    public void deleteSnapshot(DeleteSnapshotRequest request, StreamObserver<DeleteSnapshotResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getSnapshotId().isEmpty()) {
                throw CsiException.missing("snapshot_id");
            }
            var snapshot = backends.forSnapshot(request.getSnapshotId());
            if (snapshot.isPresent()) { // an id this driver never handed out names nothing to delete
                try (var held = locks.acquire(snapshotLockKey(snapshot.get().name()))) {
                    snapshot.get().delete();
                }
            }
            return DeleteSnapshotResponse.getDefaultInstance();
        });
    }

    /** Filtered by snapshot id or source volume when asked: an id nobody knows lists nothing. */
    @Override
    public void listSnapshots(ListSnapshotsRequest request, StreamObserver<ListSnapshotsResponse> response) {
        Rpc.answer(response, () -> {
            Pages.checkToken(request.getMaxEntries(), request.getStartingToken());
            var filter = new SnapshotFilter(request.getSnapshotId(), request.getSourceVolumeId());
            var page = Pages.page(request.getMaxEntries(), request.getStartingToken(),
                    (from, limit) -> backends.snapshots(filter, from, limit), Snapshot::getSnapshotId);
            var reply = ListSnapshotsResponse.newBuilder().setNextToken(page.nextToken());
            page.entries().forEach(snapshot -> reply.addEntriesBuilder().setSnapshot(snapshot));
            return reply.build();
        });
    }

    /** Apart from every volume's lock key: a local name holds no '/', an NFS key starts with "nfs ". */
    private static String snapshotLockKey(String name) {
        return "snapshot/" + name;
    }

    @Override
    public void controllerGetCapabilities(ControllerGetCapabilitiesRequest request,
            StreamObserver<ControllerGetCapabilitiesResponse> response) {
        Rpc.answer(response, () -> {
            var reply = ControllerGetCapabilitiesResponse.newBuilder();
            for (var type : backends.rpcCapabilities()) {
                reply.addCapabilitiesBuilder().getRpcBuilder().setType(type);
            }
            return reply.build();
        });
    }
}
