package dev.strata.csi.backend.nfs;

import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.backend.ParameterKeys;
import dev.strata.csi.backend.VolumeScheme;

/**
 * NFS volumes as both programs know them: the same capabilities and volume context keys. Each
 * program reads ids and contexts into a description of its own ({@code V}).
 */
public interface NfsVolumeScheme<V> extends VolumeScheme<V> {

    /** Holds no state: one serves every call. */
    NfsCapabilities CAPABILITIES = new NfsCapabilities();

    @Override
    default Capabilities capabilities() {
        return CAPABILITIES;
    }

    @Override
    default ParameterKeys volumeContextKeys() {
        return NfsParameters.VOLUME_CONTEXT;
    }
}
