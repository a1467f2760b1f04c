package dev.strata.csi.node.backend;

import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.NodeServiceCapability;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.VolumeScheme;
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
public interface NodeBackend<V> extends VolumeScheme<V> {

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

    /** NodePublishVolume with the request's secrets (the node-publish secret); a backend that takes none ignores them. */
    default void publish(V volume, Path staging, Path target, VolumeCapability capability, Map<String, String> context,
            boolean readOnly, Map<String, String> secrets) throws Exception {
        publish(volume, staging, target, capability, context, readOnly);
    }

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
