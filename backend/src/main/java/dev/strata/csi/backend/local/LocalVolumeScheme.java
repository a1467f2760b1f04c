package dev.strata.csi.backend.local;

import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.backend.ParameterKeys;
import dev.strata.csi.backend.VolumeScheme;
import java.util.Optional;

/** Local volumes as both programs know them: by their id {@code local/<node>/<name>} ({@link LocalVolumeId}). */
public interface LocalVolumeScheme extends VolumeScheme<LocalVolumeId> {

    /** Holds no state: one serves every call. */
    LocalCapabilities CAPABILITIES = new LocalCapabilities();

    @Override
    default Optional<LocalVolumeId> byId(String volumeId) {
        return LocalVolumeId.parse(volumeId);
    }

    /**
     * The volume's name, unique across the cluster: a create locks it before a node is chosen, and
     * the node agent locks the image by it too (the pool's images are one namespace).
     */
    @Override
    default String lockKey(LocalVolumeId id) {
        return id.name();
    }

    @Override
    default Capabilities capabilities() {
        return CAPABILITIES;
    }

    @Override
    default ParameterKeys volumeContextKeys() {
        return LocalParameters.VOLUME_CONTEXT;
    }
}
