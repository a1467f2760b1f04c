package dev.strata.csi.backend;

import java.util.Map;
import java.util.Optional;

/**
 * How a backend knows its volumes in both programs: what ControllerBackend and NodeBackend have
 * in common, so that the controller and the node read a volume id or context alike and lock the
 * same key for it.
 *
 * @param <V> the backend's own description of a volume, read from its id (or volume context) once
 */
public interface VolumeScheme<V> {

    /** The volume an id of this backend's scheme names; empty for an id of another scheme. */
    Optional<V> byId(String volumeId);

    /**
     * A volume whose id no backend's scheme claims, described by its volume context (a
     * PersistentVolume written by hand); empty when the context is not this backend's.
     */
    default Optional<V> byContext(String volumeId, Map<String, String> context) {
        return Optional.empty();
    }

    /**
     * A volume whose id no scheme claims, in a call without volume context (ControllerUnpublishVolume;
     * NodeUnstageVolume, NodeUnpublishVolume and NodeGetVolumeStats, where it is known only by what
     * is mounted at the call's path): a static volume. Empty when this backend has none.
     */
    default Optional<V> byStaticId(String volumeId) {
        return Optional.empty();
    }

    /** One call at a time per key: the volume's, distinct from every other volume's of any backend. */
    String lockKey(V volume);

    Capabilities capabilities();

    /** The keys a volume_context of this backend's volumes may hold. */
    ParameterKeys volumeContextKeys();
}
