package dev.strata.csi.backend;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateVolumeRequest;
import dev.strata.csi.backend.local.VolumeId;
import dev.strata.csi.rpc.CsiException;

/** The checks of a CreateVolume request that do not depend on the backend. */
public final class CreateChecks {

    private CreateChecks() {}

    /** INVALID_ARGUMENT unless the name is there and allowed, and no content is to be copied in. */
    public static void nameAndSource(CreateVolumeRequest request) {
        name(request);
        if (request.hasVolumeContentSource()) {
            throw CsiException.invalidArgument("volume_content_source is not supported: this driver cannot clone or restore snapshots");
        }
    }

    /** INVALID_ARGUMENT unless the name is there and allowed (for a backend that takes a content source itself). */
    public static void name(CreateVolumeRequest request) {
        if (request.getName().isEmpty()) {
            throw CsiException.missing("name");
        }
        VolumeId.checkName(request.getName());
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
