package dev.strata.csi.controller.local;

import dev.strata.csi.agent.api.IoLimits;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.rpc.CsiException;
import java.util.Map;

/**
 * A local volume request's keys, parsed once: the StorageClass parameters (the pool and its
 * attribute, {@link PoolRequest}; {@code encryption} = {@code none} (default) or {@code luks2})
 * and the mutable parameters (IO limits, {@link IoLimitParameters}). CreateVolume,
 * ValidateVolumeCapabilities and ControllerModifyVolume all take their keys from here, so what one
 * accepts the others accept too. INVALID_ARGUMENT for a key or value any of them would refuse.
 */
record RequestKeys(PoolRequest pool, boolean encrypted, IoLimits ioLimits) {

    static RequestKeys of(Map<String, String> parameters, Map<String, String> mutableParameters) {
        PoolRequest pool = PoolRequest.of(parameters);
        boolean encrypted = encrypted(parameters);
        if (encrypted && pool.kind() == PoolKind.POOL_LVM) {
            throw CsiException.invalidArgument("parameter " + LocalParameters.ENCRYPTION + ": the LVM pool does not encrypt volumes yet;"
                    + " encrypted volumes are the image pool's (pool: image)");
        }
        return new RequestKeys(pool, encrypted, IoLimitParameters.parse(mutableParameters));
    }

    /** The mutable parameters alone (ControllerModifyVolume's). */
    static IoLimits mutable(Map<String, String> mutableParameters) {
        return of(Map.of(), mutableParameters).ioLimits();
    }

    private static boolean encrypted(Map<String, String> parameters) {
        String value = parameters.getOrDefault(LocalParameters.ENCRYPTION, "none");
        return switch (value) {
            case "none" -> false;
            case "luks2" -> true;
            default -> throw CsiException.invalidArgument("parameter " + LocalParameters.ENCRYPTION + " must be none or luks2, got '"
                    + CsiException.printable(value) + "'");
        };
    }
}
