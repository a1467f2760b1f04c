package dev.strata.csi.controller;

import csi.v1.Csi.CreateVolumeGroupSnapshotRequest;
import csi.v1.Csi.CreateVolumeGroupSnapshotResponse;
import csi.v1.Csi.DeleteVolumeGroupSnapshotRequest;
import csi.v1.Csi.DeleteVolumeGroupSnapshotResponse;
import csi.v1.Csi.GetVolumeGroupSnapshotRequest;
import csi.v1.Csi.GetVolumeGroupSnapshotResponse;
import csi.v1.Csi.GroupControllerGetCapabilitiesRequest;
import csi.v1.Csi.GroupControllerGetCapabilitiesResponse;
import csi.v1.Csi.GroupControllerServiceCapability;
import csi.v1.GroupControllerGrpc;
import dev.strata.csi.backend.local.GroupSnapshotId;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.controller.backend.ControllerBackends;
import dev.strata.csi.controller.local.GroupSnapshots;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import dev.strata.csi.rpc.VolumeLocks;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The CSI GroupController service: group snapshots of local volumes, one consistent cut across
 * them ({@link GroupSnapshots}). An NFS volume's snapshot is a copy of its directory tree, which
 * is no point-in-time cut, so a group with one is refused (FAILED_PRECONDITION; docs/nfs.md).
 */
public final class GroupControllerService extends GroupControllerGrpc.GroupControllerImplBase {

    private final ControllerBackends backends;
    private final GroupSnapshots groups;
    private final VolumeLocks locks = new VolumeLocks();

    public GroupControllerService(ControllerBackends backends, GroupSnapshots groups) {
        this.backends = backends;
        this.groups = groups;
    }

    @Override
    public void groupControllerGetCapabilities(GroupControllerGetCapabilitiesRequest request,
            StreamObserver<GroupControllerGetCapabilitiesResponse> response) {
        Rpc.answer(response, () -> {
            var reply = GroupControllerGetCapabilitiesResponse.newBuilder();
            reply.addCapabilitiesBuilder().getRpcBuilder().setType(GroupControllerServiceCapability.RPC.Type.CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT);
            return reply.build();
        });
    }

    @Override
    public void createVolumeGroupSnapshot(CreateVolumeGroupSnapshotRequest request, StreamObserver<CreateVolumeGroupSnapshotResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getName().isEmpty()) {
                throw CsiException.missing("name");
            }
            GroupSnapshotId.checkName(request.getName());
            if (request.getSourceVolumeIdsCount() == 0) {
                throw CsiException.missing("source_volume_ids");
            }
            LocalParameters.SNAPSHOT_CLASS.require(request.getParametersMap());
            int copies = LocalParameters.copies(request.getParametersMap());
            if (copies != 1) {
                throw CsiException.invalidArgument("VolumeGroupSnapshotClass parameter " + LocalParameters.COPIES + " is " + copies
                        + ": a group snapshot is kept on its volumes' nodes only (copies 1)");
            }
            List<LocalVolumeId> volumes = new ArrayList<>();
            for (String id : request.getSourceVolumeIdsList()) {
                volumes.add(local(id));
            }
            try (var held = locks.acquire(request.getName())) {
                return CreateVolumeGroupSnapshotResponse.newBuilder()
                        .setGroupSnapshot(groups.create(new GroupSnapshotId(request.getName()), volumes)).build();
            }
        });
    }

    @Override
    public void getVolumeGroupSnapshot(GetVolumeGroupSnapshotRequest request, StreamObserver<GetVolumeGroupSnapshotResponse> response) {
        Rpc.answer(response, () -> {
            GroupSnapshotId id = id(request.getGroupSnapshotId()).orElseThrow(() -> CsiException.notFound(
                    "group snapshot " + CsiException.printable(request.getGroupSnapshotId()) + " does not exist"));
            return GetVolumeGroupSnapshotResponse.newBuilder().setGroupSnapshot(groups.get(id, request.getSnapshotIdsList())).build();
        });
    }

    @Override
    public void deleteVolumeGroupSnapshot(DeleteVolumeGroupSnapshotRequest request, StreamObserver<DeleteVolumeGroupSnapshotResponse> response) {
        Rpc.answer(response, () -> {
            Optional<GroupSnapshotId> id = id(request.getGroupSnapshotId());
            if (id.isPresent()) { // an id this driver never handed out names nothing to delete
                try (var held = locks.acquire(id.get().name())) {
                    groups.delete(id.get(), request.getSnapshotIdsList());
                }
            }
            return DeleteVolumeGroupSnapshotResponse.getDefaultInstance();
        });
    }

    private static Optional<GroupSnapshotId> id(String id) {
        if (id.isEmpty()) {
            throw CsiException.missing("group_snapshot_id");
        }
        return GroupSnapshotId.parse(id);
    }

    /** The local volume the id names; FAILED_PRECONDITION for another backend's volume, NOT_FOUND for an id nobody handed out. */
    private LocalVolumeId local(String id) {
        Optional<LocalVolumeId> volume = LocalVolumeId.parse(id);
        if (volume.isPresent()) {
            return volume.get();
        }
        if (backends.provisioned(id).isPresent()) {
            throw CsiException.failedPrecondition("volume " + CsiException.printable(id) + " is an NFS volume: its snapshot is a copy of"
                    + " its directory tree, which is no point-in-time cut, so it cannot be in a group snapshot (docs/nfs.md)");
        }
        throw CsiException.notFound("source volume " + CsiException.printable(id) + " does not exist");
    }
}
