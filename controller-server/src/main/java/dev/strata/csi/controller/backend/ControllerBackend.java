package dev.strata.csi.controller.backend;

import csi.v1.Csi.ControllerServiceCapability;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.KubernetesKeys;
import dev.strata.csi.backend.ParameterKeys;
import dev.strata.csi.backend.VolumeScheme;
import dev.strata.csi.rpc.CsiException;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * One backend's work on the controller: what ControllerService delegates to once it has checked
 * the request, chosen the backend ({@link ControllerBackends}) and taken the volume's lock. Each
 * call is idempotent. A backend that takes snapshots says so in {@link #rpcCapabilities} and
 * implements the snapshot methods; their defaults answer UNIMPLEMENTED.
 *
 * @param <V> the backend's own description of an existing volume, read from its id (or context) once
 * @param <C> a CreateVolume request for this backend, once checked
 */
public interface ControllerBackend<V, C> extends VolumeScheme<V> {

    /** A VolumeAttributesClass for a backend that takes none: only Kubernetes' own keys pass. */
    ParameterKeys NO_MUTABLE_PARAMETERS = new ParameterKeys(KubernetesKeys.Request.MODIFY_VOLUME, "volumes of this backend",
            Set.of(), Set.of());

    /** Whether StorageClass parameters (CreateVolume, GetCapacity) ask for this backend. */
    boolean wanted(Map<String, String> parameters);

    /**
     * The Controller service capabilities this backend needs advertised: by default what every
     * backend of this driver does; a backend that can do more (expansion, snapshots) lists more.
     */
    default List<ControllerServiceCapability.RPC.Type> rpcCapabilities() {
        return List.of(
                ControllerServiceCapability.RPC.Type.CREATE_DELETE_VOLUME,
                ControllerServiceCapability.RPC.Type.PUBLISH_UNPUBLISH_VOLUME,
                ControllerServiceCapability.RPC.Type.LIST_VOLUMES,
                ControllerServiceCapability.RPC.Type.LIST_VOLUMES_PUBLISHED_NODES,
                ControllerServiceCapability.RPC.Type.GET_VOLUME,
                ControllerServiceCapability.RPC.Type.GET_CAPACITY,
                ControllerServiceCapability.RPC.Type.SINGLE_NODE_MULTI_WRITER,
                ControllerServiceCapability.RPC.Type.EXPAND_VOLUME);
    }

    /**
     * The request checked (INVALID_ARGUMENT, OUT_OF_RANGE...), before any lock is taken. A
     * volume_content_source reaches a backend only when it advertises the capability it needs
     * (CREATE_DELETE_SNAPSHOT for a snapshot, CLONE_VOLUME for a volume); a source that does not
     * exist is NOT_FOUND, one this backend cannot copy from (another backend's) INVALID_ARGUMENT.
     * The mutable parameters are checked here too, as {@link #checkMutableParameters} checks them.
     */
    C check(CreateVolumeRequest request);

    /** The lock a CreateVolume takes: the same as the volume's once made. */
    String createLockKey(C request);

    Volume create(C request) throws Exception;

    /** Frees the volume; success when it is gone already. */
    void delete(V volume) throws Exception;

    /** Makes the volume usable on the node; the reply's publish_context. */
    Map<String, String> publish(V volume, String nodeId, VolumeCapability capability) throws Exception;

    /** Undoes publish for the node (every node when empty); success when not published there. */
    void unpublish(V volume, String nodeId) throws Exception;

    /**
     * NOT_FOUND unless the volume exists; then why these StorageClass parameters would be refused,
     * or empty when they are fine (ValidateVolumeCapabilities).
     */
    Optional<String> validate(V volume, Map<String, String> parameters) throws Exception;

    /**
     * INVALID_ARGUMENT unless the backend can honour these mutable parameters (CreateVolume's,
     * ControllerModifyVolume's: a VolumeAttributesClass's). By default a backend takes none; a
     * request without any is fine. A backend that takes some advertises MODIFY_VOLUME.
     */
    default void checkMutableParameters(Map<String, String> parameters) {
        NO_MUTABLE_PARAMETERS.require(parameters);
    }

    /**
     * ControllerModifyVolume: changes what the mutable parameters name, and only that (a key left
     * out keeps its value); NOT_FOUND when the volume does not exist. Repeating it changes nothing.
     */
    default void modify(V volume, Map<String, String> parameters) throws Exception {
        checkMutableParameters(parameters);
        validate(volume, Map.of()); // NOT_FOUND for a volume that does not exist
    }

    /** A volume's size after ControllerExpandVolume, and whether NodeExpandVolume must grow its filesystem. */
    record Expansion(long capacityBytes, boolean nodeExpansionRequired) {}

    /**
     * Grows the volume to at least {@code bytes} (NOT_FOUND when it does not exist); a size it
     * has already changes nothing, a smaller one never shrinks it. {@code capability} is how the
     * volume is used, when the caller says (block access needs no node step).
     */
    Expansion expand(V volume, long bytes, Optional<VolumeCapability> capability) throws Exception;

    /**
     * The snapshot name inside an id of this backend's snapshot scheme; empty for an id of another
     * scheme, or one this driver never handed out. The name is unique across the cluster: the
     * snapshot's lock is taken by it.
     */
    default Optional<String> snapshotName(String snapshotId) {
        return Optional.empty();
    }

    /**
     * Takes a snapshot of the volume under {@code name}, and returns it once complete
     * (ready_to_use). The same name and source again: the same snapshot; the name taken by a
     * snapshot of another volume: ALREADY_EXISTS. A snapshot outlives its source volume.
     */
    default Snapshot createSnapshot(V source, String name, Map<String, String> parameters) throws Exception {
        throw unimplemented();
    }

    /** Frees the snapshot the id names (the id has this backend's scheme); success when it is gone already. */
    default void deleteSnapshot(String snapshotId) throws Exception {
        throw unimplemented();
    }

    /** Every snapshot of this backend, for ListSnapshots. */
    default List<Snapshot> snapshots() throws Exception {
        return List.of();
    }

    /**
     * At most {@code limit} of this backend's snapshots that {@code filter} lets through, with ids
     * at or after {@code fromId}, in id order: one page of ListSnapshots. By default cut from
     * {@link #snapshots()}; a backend with many answers it from an ordered index.
     */
    default List<Snapshot> snapshots(SnapshotFilter filter, String fromId, int limit) throws Exception {
        return snapshots().stream()
                .filter(filter::matches)
                .filter(snapshot -> snapshot.getSnapshotId().compareTo(fromId) >= 0)
                .sorted(Comparator.comparing(Snapshot::getSnapshotId))
                .limit(limit)
                .toList();
    }

    private static CsiException unimplemented() {
        return CsiException.unimplemented("this backend takes no snapshots");
    }

    /** Every volume of this backend, for ListVolumes. */
    List<ListVolumesResponse.Entry> list() throws Exception;

    /**
     * At most {@code limit} of this backend's volumes whose ids are at or after {@code fromId}, in
     * id order: one page of ListVolumes. By default cut from {@link #list}; a backend with many
     * volumes answers it from an ordered index, at the cost of the page only.
     */
    default List<ListVolumesResponse.Entry> list(String fromId, int limit) throws Exception {
        return list().stream()
                .filter(entry -> entry.getVolume().getVolumeId().compareTo(fromId) >= 0)
                .sorted(Comparator.comparing(entry -> entry.getVolume().getVolumeId()))
                .limit(limit)
                .toList();
    }

    /**
     * ControllerGetVolume: the volume as ListVolumes lists it (with the nodes it is published to);
     * empty when it does not exist. By default the first entry of a one-entry page from its id.
     */
    default Optional<ListVolumesResponse.Entry> get(V volume, String volumeId) throws Exception {
        return list(volumeId, 1).stream().filter(entry -> entry.getVolume().getVolumeId().equals(volumeId)).findFirst();
    }

    /** What a new volume can get, for GetCapacity (the request's topology and parameters). */
    long availableBytes(GetCapacityRequest request) throws Exception;
}
