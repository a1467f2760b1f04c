package dev.strata.csi.conformance;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.ValidateVolumeCapabilitiesRequest;
import csi.v1.Csi.Volume;
import java.nio.file.Path;
import java.util.Map;

/**
 * Complete requests, every required field set, as a CO sends them: the volume's context from
 * CreateVolume goes along, and so does the publish context from ControllerPublishVolume. Tests of
 * a missing field clear it from one of these.
 */
final class Requests {

    private Requests() {}

    /** A volume known only by an id, for requests about volumes the driver never made. */
    static Volume volume(String id) {
        return Volume.newBuilder().setVolumeId(id).build();
    }

    static CreateVolumeRequest createVolume(String name, AccessType type, long bytes, TopologyRequirement requirement) {
        return CreateVolumeRequest.newBuilder()
                .setName(name)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(bytes))
                .addVolumeCapabilities(type.capability())
                .setAccessibilityRequirements(requirement)
                .build();
    }

    static DeleteVolumeRequest deleteVolume(Volume volume) {
        return DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build();
    }

    static ValidateVolumeCapabilitiesRequest validateVolumeCapabilities(Volume volume, AccessType type) {
        return ValidateVolumeCapabilitiesRequest.newBuilder()
                .setVolumeId(volume.getVolumeId())
                .putAllVolumeContext(volume.getVolumeContextMap())
                .addVolumeCapabilities(type.capability())
                .build();
    }

    static ControllerPublishVolumeRequest controllerPublishVolume(Volume volume, String nodeId, AccessType type) {
        return ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId())
                .setNodeId(nodeId)
                .setVolumeCapability(type.capability())
                .putAllVolumeContext(volume.getVolumeContextMap())
                .build();
    }

    static ControllerUnpublishVolumeRequest controllerUnpublishVolume(Volume volume, String nodeId) {
        return ControllerUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setNodeId(nodeId).build();
    }

    static NodeStageVolumeRequest nodeStageVolume(Volume volume, AccessType type, Path stagingPath, Map<String, String> publishContext) {
        return NodeStageVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(stagingPath.toString())
                .setVolumeCapability(type.capability())
                .putAllPublishContext(publishContext)
                .putAllVolumeContext(volume.getVolumeContextMap())
                .build();
    }

    static NodeUnstageVolumeRequest nodeUnstageVolume(Volume volume, Path stagingPath) {
        return NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setStagingTargetPath(stagingPath.toString()).build();
    }

    /** {@code stagingPath} is null for a node that does not stage. */
    static NodePublishVolumeRequest nodePublishVolume(Volume volume, AccessType type, Path stagingPath, Path targetPath,
            Map<String, String> publishContext) {
        NodePublishVolumeRequest.Builder request = NodePublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId())
                .setTargetPath(targetPath.toString())
                .setVolumeCapability(type.capability())
                .putAllPublishContext(publishContext)
                .putAllVolumeContext(volume.getVolumeContextMap());
        if (stagingPath != null) {
            request.setStagingTargetPath(stagingPath.toString());
        }
        return request.build();
    }

    static NodeUnpublishVolumeRequest nodeUnpublishVolume(Volume volume, Path targetPath) {
        return NodeUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setTargetPath(targetPath.toString()).build();
    }
}
