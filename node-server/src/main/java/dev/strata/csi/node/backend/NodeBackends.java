package dev.strata.csi.node.backend;

import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.NodeServiceCapability;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.rpc.CsiException;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

/**
 * The one place the node decides which backend serves a volume, once per call: the backend
 * whose id scheme the volume id has ({@code local/...}, {@code nfs/...}); for an id no scheme
 * claims, a static volume: the backend its volume context describes (stage, publish), or, in the
 * calls that carry no context (unstage, unpublish, stats), the backend that serves static
 * volumes by their paths. Nothing else in the node looks at a volume id's form.
 */
public final class NodeBackends {

    private final List<NodeBackend<?>> backends;

    public NodeBackends(List<NodeBackend<?>> backends) {
        this.backends = List.copyOf(backends);
    }

    /** For the calls that carry a volume context (NodeStageVolume, NodePublishVolume): by id, else a static volume by its context; NOT_FOUND for a volume no backend knows. */
    public Chosen<?> withContext(String volumeId, Map<String, String> context) {
        return first(backend -> byId(backend, volumeId))
                .or(() -> first(backend -> byContext(backend, volumeId, context)))
                .orElseThrow(() -> notFound(volumeId));
    }

    /** For the calls that carry no volume context (NodeUnstageVolume, NodeUnpublishVolume, NodeGetVolumeStats): by id, else a static volume by its id alone. */
    public Chosen<?> withoutContext(String volumeId) {
        return first(backend -> byId(backend, volumeId))
                .or(() -> first(backend -> byStaticId(backend, volumeId)))
                .orElseThrow(() -> notFound(volumeId));
    }

    /** What the Node service advertises: every capability some backend needs, in the order first named. */
    public List<NodeServiceCapability.RPC.Type> rpcCapabilities() {
        Set<NodeServiceCapability.RPC.Type> all = new LinkedHashSet<>();
        backends.forEach(backend -> all.addAll(backend.rpcCapabilities()));
        return List.copyOf(all);
    }

    private Optional<Chosen<?>> first(Function<NodeBackend<?>, Optional<Chosen<?>>> choice) {
        for (NodeBackend<?> backend : backends) {
            Optional<Chosen<?>> chosen = choice.apply(backend);
            if (chosen.isPresent()) {
                return chosen;
            }
        }
        return Optional.empty();
    }

    private static <V> Optional<Chosen<?>> byId(NodeBackend<V> backend, String volumeId) {
        return backend.byId(volumeId).map(volume -> new Chosen<>(backend, volume));
    }

    private static <V> Optional<Chosen<?>> byContext(NodeBackend<V> backend, String volumeId, Map<String, String> context) {
        return backend.byContext(volumeId, context).map(volume -> new Chosen<>(backend, volume));
    }

    private static <V> Optional<Chosen<?>> byStaticId(NodeBackend<V> backend, String volumeId) {
        return backend.byStaticId(volumeId).map(volume -> new Chosen<>(backend, volume));
    }

    private static CsiException notFound(String volumeId) {
        return CsiException.notFound("volume " + CsiException.printable(volumeId) + " does not exist");
    }

    /** A volume with the backend that serves it: what NodeService calls once it holds the volume's lock. */
    public record Chosen<V>(NodeBackend<V> backend, V volume) {

        public String lockKey() {
            return backend.lockKey(volume);
        }

        public Capabilities capabilities() {
            return backend.capabilities();
        }

        /** INVALID_ARGUMENT for a volume_context key that neither Kubernetes, an administrator nor the driver sets. */
        public void requireKnownContext(Map<String, String> context) {
            backend.volumeContextKeys().require(context);
        }

        public void stage(Path staging, VolumeCapability capability, Map<String, String> context, Map<String, String> secrets)
                throws Exception {
            backend.stage(volume, staging, capability, context, secrets);
        }

        public void unstage(Path staging) throws Exception {
            backend.unstage(volume, staging);
        }

        public void publish(Path staging, Path target, VolumeCapability capability, Map<String, String> context,
                boolean readOnly, Map<String, String> secrets) throws Exception {
            backend.publish(volume, staging, target, capability, context, readOnly, secrets);
        }

        public void unpublish(Path target) throws Exception {
            backend.unpublish(volume, target);
        }

        public long expand(Path volumePath, Optional<VolumeCapability> capability, Map<String, String> secrets) throws Exception {
            return backend.expand(volume, volumePath, capability, secrets);
        }

        public NodeGetVolumeStatsResponse stats(Path path) throws Exception {
            return backend.stats(volume, path);
        }
    }
}
