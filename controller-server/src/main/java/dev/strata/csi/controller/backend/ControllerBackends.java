package dev.strata.csi.controller.backend;

import csi.v1.Csi.ControllerServiceCapability;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.rpc.CsiException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

/**
 * The one place the controller decides which backend serves a volume, once per call: for
 * CreateVolume and GetCapacity the first backend that wants the StorageClass parameters (the
 * last one listed takes any: the default); for an existing volume the backend whose id scheme its
 * id has, or, for an id no scheme claims, the backend its volume context describes (a static
 * volume), or in a call without context the backend that keeps static volumes. Nothing else in
 * the controller looks at a volume id's form.
 */
public final class ControllerBackends {

    private final List<ControllerBackend<?, ?>> backends;

    public ControllerBackends(List<ControllerBackend<?, ?>> backends) {
        if (backends.isEmpty()) {
            throw new IllegalArgumentException("no backend");
        }
        this.backends = List.copyOf(backends);
    }

    /**
     * CreateVolume's request checked by the backend its parameters choose; INVALID_ARGUMENT for a
     * content source of a kind that backend cannot create from, or one of another backend.
     */
    public Creation<?> forCreate(CreateVolumeRequest request) {
        ControllerBackend<?, ?> backend = forParameters(request.getParametersMap());
        if (request.hasVolumeContentSource()) {
            requireOwnSource(backend, request.getVolumeContentSource());
        }
        return creation(backend, request);
    }

    /** INVALID_ARGUMENT unless {@code backend} can make a volume from {@code source}: its kind advertised, and no other backend's id. */
    private void requireOwnSource(ControllerBackend<?, ?> backend, VolumeContentSource source) {
        var needed = switch (source.getTypeCase()) {
            case SNAPSHOT -> ControllerServiceCapability.RPC.Type.CREATE_DELETE_SNAPSHOT;
            case VOLUME -> ControllerServiceCapability.RPC.Type.CLONE_VOLUME;
            case TYPE_NOT_SET -> throw CsiException.invalidArgument("volume_content_source names neither a snapshot nor a volume");
        };
        if (!backend.rpcCapabilities().contains(needed)) {
            throw CsiException.invalidArgument("volume_content_source: this StorageClass's backend cannot create a volume from a "
                    + source.getTypeCase().name().toLowerCase(Locale.ROOT));
        }
        String sourceId = source.hasSnapshot() ? source.getSnapshot().getSnapshotId() : source.getVolume().getVolumeId();
        boolean another = backends.stream().filter(other -> other != backend).anyMatch(other -> source.hasSnapshot()
                ? other.snapshotName(sourceId).isPresent() : other.byId(sourceId).isPresent());
        if (another) { // copying between backends is not offered; the backend itself answers NOT_FOUND for an id nobody knows
            throw CsiException.invalidArgument("volume_content_source " + CsiException.printable(sourceId)
                    + " belongs to another backend than this StorageClass's; a volume is made from a source of its own backend");
        }
    }

    /** The backend StorageClass parameters choose (CreateVolume, GetCapacity). */
    public ControllerBackend<?, ?> forParameters(Map<String, String> parameters) {
        return backends.stream().filter(backend -> backend.wanted(parameters)).findFirst().orElse(backends.getLast());
    }

    /**
     * For the calls that carry a volume context (ControllerPublishVolume,
     * ValidateVolumeCapabilities): by id, else a static volume by its context; NOT_FOUND for a
     * volume no backend knows. NodeBackends' {@code withContext} decides the same way.
     */
    public Chosen<?> withContext(String volumeId, Map<String, String> context) {
        return first(backend -> byId(backend, volumeId))
                .or(() -> first(backend -> byContext(backend, volumeId, context)))
                .orElseThrow(() -> CsiException.notFound("volume " + CsiException.printable(volumeId) + " does not exist"));
    }

    /**
     * A volume this driver provisioned, by its id alone (DeleteVolume, ControllerExpandVolume,
     * ControllerModifyVolume, CreateSnapshot): only an id it handed out names one; a static volume
     * is not the driver's to delete, grow, change or snapshot.
     */
    public Optional<Chosen<?>> provisioned(String volumeId) {
        return first(backend -> byId(backend, volumeId));
    }

    /**
     * For the call that carries no volume context (ControllerUnpublishVolume): by id, else a static
     * volume by its id alone; empty: a volume nobody knows, not published anywhere.
     */
    public Optional<Chosen<?>> withoutContext(String volumeId) {
        return first(backend -> byId(backend, volumeId)).or(() -> first(backend -> byStaticId(backend, volumeId)));
    }

    /** For DeleteSnapshot: the backend whose scheme the id has; empty for an id this driver never handed out. */
    public Optional<SnapshotOwner> forSnapshot(String snapshotId) {
        for (ControllerBackend<?, ?> backend : backends) {
            Optional<String> name = backend.snapshotName(snapshotId);
            if (name.isPresent()) {
                return Optional.of(new SnapshotOwner(backend, snapshotId, name.get()));
            }
        }
        return Optional.empty();
    }

    /** At most {@code limit} snapshots of all backends that {@code filter} lets through, ids at or after {@code fromId}, in id order. */
    public List<Snapshot> snapshots(SnapshotFilter filter, String fromId, int limit) throws Exception {
        return merged(backend -> backend.snapshots(filter, fromId, limit), Snapshot::getSnapshotId, limit);
    }

    /** At most {@code limit} volumes of all backends with ids at or after {@code fromId}, in id order: a page of ListVolumes. */
    public List<ListVolumesResponse.Entry> list(String fromId, int limit) throws Exception {
        return merged(backend -> backend.list(fromId, limit), entry -> entry.getVolume().getVolumeId(), limit);
    }

    /** One page from each backend's page: the first {@code limit} of them all, in id order. */
    private <T> List<T> merged(Page<T> page, Function<T, String> id, int limit) throws Exception {
        List<T> entries = new ArrayList<>();
        for (ControllerBackend<?, ?> backend : backends) {
            entries.addAll(page.of(backend));
        }
        entries.sort(Comparator.comparing(id));
        return entries.size() > limit ? entries.subList(0, limit) : entries;
    }

    @FunctionalInterface
    private interface Page<T> {
        List<T> of(ControllerBackend<?, ?> backend) throws Exception;
    }

    /** What the Controller service advertises: every capability some backend needs, in the order first named. */
    public List<ControllerServiceCapability.RPC.Type> rpcCapabilities() {
        Set<ControllerServiceCapability.RPC.Type> all = new LinkedHashSet<>();
        backends.forEach(backend -> all.addAll(backend.rpcCapabilities()));
        return List.copyOf(all);
    }

    private Optional<Chosen<?>> first(Function<ControllerBackend<?, ?>, Optional<Chosen<?>>> choice) {
        for (ControllerBackend<?, ?> backend : backends) {
            Optional<Chosen<?>> chosen = choice.apply(backend);
            if (chosen.isPresent()) {
                return chosen;
            }
        }
        return Optional.empty();
    }

    private static <V> Optional<Chosen<?>> byId(ControllerBackend<V, ?> backend, String volumeId) {
        return backend.byId(volumeId).map(volume -> new Chosen<>(backend, volume));
    }

    private static <V> Optional<Chosen<?>> byContext(ControllerBackend<V, ?> backend, String volumeId, Map<String, String> context) {
        return backend.byContext(volumeId, context).map(volume -> new Chosen<>(backend, volume));
    }

    private static <V> Optional<Chosen<?>> byStaticId(ControllerBackend<V, ?> backend, String volumeId) {
        return backend.byStaticId(volumeId).map(volume -> new Chosen<>(backend, volume));
    }

    private static <C> Creation<C> creation(ControllerBackend<?, C> backend, CreateVolumeRequest request) {
        return new Creation<>(backend, backend.check(request));
    }

    /** A checked CreateVolume with the backend that makes it. */
    public record Creation<C>(ControllerBackend<?, C> backend, C request) {

        public String lockKey() {
            return backend.createLockKey(request);
        }

        public Volume create() throws Exception {
            return backend.create(request);
        }
    }

    /** An existing volume with the backend that serves it: what ControllerService calls once it holds the volume's lock. */
    public record Chosen<V>(ControllerBackend<V, ?> backend, V volume) {

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

        public void delete() throws Exception {
            backend.delete(volume);
        }

        public Map<String, String> publish(String nodeId, VolumeCapability capability) throws Exception {
            return backend.publish(volume, nodeId, capability);
        }

        public ControllerBackend.Expansion expand(long bytes, Optional<VolumeCapability> capability) throws Exception {
            return backend.expand(volume, bytes, capability);
        }

        public void modify(Map<String, String> mutableParameters) throws Exception {
            backend.modify(volume, mutableParameters);
        }

        public void unpublish(String nodeId) throws Exception {
            backend.unpublish(volume, nodeId);
        }

        public Snapshot createSnapshot(String name, Map<String, String> parameters) throws Exception {
            return backend.createSnapshot(volume, name, parameters);
        }

        public Optional<String> validate(Map<String, String> parameters) throws Exception {
            return backend.validate(volume, parameters);
        }

        public Optional<ListVolumesResponse.Entry> get(String volumeId) throws Exception {
            return backend.get(volume, volumeId);
        }
    }

    /** A snapshot id with the backend whose scheme it has, and the snapshot's name in it. */
    public record SnapshotOwner(ControllerBackend<?, ?> backend, String snapshotId, String name) {

        public void delete() throws Exception {
            backend.deleteSnapshot(snapshotId);
        }
    }
}
