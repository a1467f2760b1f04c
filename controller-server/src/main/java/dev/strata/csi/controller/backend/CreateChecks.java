package dev.strata.csi.controller.backend;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateVolumeRequest;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.rpc.CsiException;

/** The checks of a CreateVolume request that do not depend on the backend. */
public final class CreateChecks {

    private CreateChecks() {}

    /**
     * INVALID_ARGUMENT unless the name is there and allowed, and a content source, if any, names
     * its snapshot or volume (whether the backend can copy from that kind is {@link ControllerBackends}'
     * check, whether the source exists the backend's).
     */
    public static void name(CreateVolumeRequest request) {
        if (request.getName().isEmpty()) {
            throw CsiException.missing("name");
        }
        LocalVolumeId.checkName(request.getName());
        if (request.hasVolumeContentSource()) {
            var source = request.getVolumeContentSource();
            if (source.hasSnapshot() && source.getSnapshot().getSnapshotId().isEmpty()) {
                throw CsiException.missing("volume_content_source.snapshot.snapshot_id");
            }
            if (source.hasVolume() && source.getVolume().getVolumeId().isEmpty()) {
                throw CsiException.missing("volume_content_source.volume.volume_id");
            }
        }
    }

    /** OUT_OF_RANGE for a range no size meets: a negative bound, or required above limit. */
    public static void range(CapacityRange range) {
        if (range.getRequiredBytes() < 0 || range.getLimitBytes() < 0) {
            throw CsiException.outOfRange("capacity_range must not be negative");
        }
        if (range.getLimitBytes() > 0 && range.getRequiredBytes() > range.getLimitBytes()) {
            throw CsiException.outOfRange("capacity_range required_bytes " + range.getRequiredBytes() + " exceeds limit_bytes "
                    + range.getLimitBytes());
        }
    }
}
