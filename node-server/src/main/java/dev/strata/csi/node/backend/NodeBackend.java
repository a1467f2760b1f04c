package dev.strata.csi.node.backend;

import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.NodeServiceCapability;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.backend.ParameterKeys;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * One backend's work on this node: what NodeService delegates to once it has checked the request,
 * chosen the backend ({@link NodeBackends}) and taken the volume's lock. Each call is idempotent:
 * it first checks whether its effect is there already.
 *
 * @param <V> the backend's own description of a volume, read from its id (or volume context) once
 */
public interface NodeBackend<V> {

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
     * A volume whose id no scheme claims, in a call without volume context (unstage, unpublish,
     * stats): a static volume, known only by what is mounted at the call's path. Empty when this
     * backend has no static volumes.
     */
    default Optional<V> byPathOnly(String volumeId) {
        return Optional.empty();
    }

    /** One call at a time per key: the volume's, distinct from every other volume's of any backend. */
    String lockKey(V volume);

    Capabilities capabilities();

    /** The keys a volume_context of this backend's volumes may hold (NodeStageVolume, NodePublishVolume). */
    ParameterKeys volumeContextKeys();

    /**
     * The Node service capabilities this backend needs advertised: by default what every backend
     * of this driver does; a backend that can do more (expansion) lists more.
     */
    default List<NodeServiceCapability.RPC.Type> rpcCapabilities() {
        return List.of(
                NodeServiceCapability.RPC.Type.STAGE_UNSTAGE_VOLUME,
                NodeServiceCapability.RPC.Type.GET_VOLUME_STATS,
                NodeServiceCapability.RPC.Type.VOLUME_CONDITION,
                NodeServiceCapability.RPC.Type.SINGLE_NODE_MULTI_WRITER,
                NodeServiceCapability.RPC.Type.EXPAND_VOLUME);
    }

    void stage(V volume, Path staging, VolumeCapability capability, Map<String, String> context) throws Exception;

    /** NodeStageVolume with the request's secrets (the node-stage secret); a backend that takes none ignores them. */
    default void stage(V volume, Path staging, VolumeCapability capability, Map<String, String> context,
            Map<String, String> secrets) throws Exception {
        stage(volume, staging, capability, context);
    }

    void unstage(V volume, Path staging) throws Exception;

    void publish(V volume, Path staging, Path target, VolumeCapability capability, Map<String, String> context,
            boolean readOnly) throws Exception;

    void unpublish(V volume, Path target) throws Exception;

    /**
     * NodeExpandVolume: makes the volume at {@code volumePath} (staged or published) as large as
     * ControllerExpandVolume made it, online, and returns its size in bytes. NOT_FOUND when the
     * volume is not there.
     */
    long expand(V volume, Path volumePath, Optional<VolumeCapability> capability) throws Exception;

    /** NodeExpandVolume with the request's secrets (the node-expand secret); a backend that takes none ignores them. */
    default long expand(V volume, Path volumePath, Optional<VolumeCapability> capability, Map<String, String> secrets) throws Exception {
        return expand(volume, volumePath, capability);
    }

    /** Usage and condition of the volume mounted at {@code path}; NOT_FOUND when it is not mounted there. */
    NodeGetVolumeStatsResponse stats(V volume, Path path) throws Exception;
}
