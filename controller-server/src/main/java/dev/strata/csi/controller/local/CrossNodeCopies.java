package dev.strata.csi.controller.local;

import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.CreateSnapshotRequest;
import dev.strata.csi.agent.api.DeleteSnapshotRequest;
import dev.strata.csi.agent.api.GetVolumeRequest;
import dev.strata.csi.agent.api.ReceiveVolumeRequest;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.controller.agents.AgentDirectory;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Optional;

/**
 * Volumes made on one node with the content of a snapshot or volume another node holds: a restore
 * or clone where the topology requirement names another node (with WaitForFirstConsumer, the pod
 * was scheduled there). The content streams through this controller ({@link ContentRelay}) in a
 * copy that outlives the CreateVolume call ({@link Transfers}).
 *
 * <p>A volume in use (attached) is copied from a temporary snapshot on its node, taken with its
 * filesystem frozen as any snapshot is, so the copy is consistent while the pod goes on writing;
 * it is deleted once the copy is complete. Its name follows from the new volume's, so a retried
 * copy reads the same snapshot and resumes; the node agent keeps it out of ListSnapshots and
 * removes it at its next start, should no retry ever come. A detached volume is read as it is,
 * held against attachment meanwhile. The new volume goes into the pool its StorageClass names,
 * whatever pool holds the source: both pools read and write the same stream.
 */
final class CrossNodeCopies {

    private static final String TEMPORARY_PREFIX = "transfer.";

    private final AgentDirectory agents;
    private final ContentRelay relay;
    private final Transfers<Volume> transfers = new Transfers<>();

    CrossNodeCopies(AgentDirectory agents, ContentRelay relay) {
        this.agents = agents;
        this.relay = relay;
    }

    /** The volume {@code wanted} on {@code target}, with the content {@code source} names on {@code holder}. */
    Volume copy(String holder, ContentSource source, String description, String target, VolumeRequest wanted) throws Exception {
        return transfers.await(wanted.name(), target, "copying " + description + " from node " + holder, progress -> {
            ContentSource read = source;
            if (source.hasVolume() && attached(holder, source.getVolume())) {
                String snapshot = temporarySnapshot(wanted.name());
                agents.stub(holder, GroupSnapshots.FREEZE_DEADLINE).createSnapshot(CreateSnapshotRequest.newBuilder() // a freeze and a copy
                        .setName(snapshot).setSourceVolume(source.getVolume()).setTemporary(true).build());
                read = ContentSource.newBuilder().setSnapshot(snapshot).build();
            }
            Volume volume = relay.copy(agent(holder), read, agent(target), ReceiveVolumeRequest.newBuilder()
                    .setName(wanted.name())
                    .setCapacityBytes(wanted.capacityBytes())
                    .setAllocation(wanted.allocation())
                    .setLvType(wanted.lvType())
                    .setPool(wanted.pool().kind())
                    .setThinOvercommitRatio(wanted.pool().thinOvercommitRatio())
                    .setSource(source)
                    .setEncrypted(wanted.encrypted())
                    .build(), progress);
            cleanUp(holder, source, wanted.name());
            return volume;
        });
    }

    /**
     * The copy this controller runs for the volume {@code name}, once complete; empty when it runs
     * none. The retried CreateVolume waits here: the nodes' agents hold the source and the new
     * volume against other calls while they stream.
     */
    Optional<Transfers.Copied<Volume>> running(String name) throws Exception {
        return transfers.join(name);
    }

    /** Removes the temporary snapshot a copy of {@code source} into {@code volume} may have left on {@code holder}. */
    void cleanUp(String holder, ContentSource source, String volume) {
        if (source.hasVolume()) {
            agents.stub(holder).deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName(temporarySnapshot(volume)).build());
        }
    }

    private boolean attached(String holder, String volume) {
        return !agents.stub(holder).getVolume(GetVolumeRequest.newBuilder().setName(volume).build()).getVolume().getDevicePath().isEmpty();
    }

    private ContentRelay.Agent agent(String nodeId) {
        return new ContentRelay.Agent(nodeId, agents.streamStub(nodeId), agents.stub(nodeId));
    }

    /** The temporary snapshot's name: the volume's (names are unique in the cluster), within the 128 characters a name may have. */
    static String temporarySnapshot(String volume) {
        String name = TEMPORARY_PREFIX + volume;
        return name.length() <= 128 ? name : TEMPORARY_PREFIX + sha256(volume);
    }

    private static String sha256(String value) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(value.getBytes(StandardCharsets.UTF_8)));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java runtime has SHA-256", e);
        }
    }
}
