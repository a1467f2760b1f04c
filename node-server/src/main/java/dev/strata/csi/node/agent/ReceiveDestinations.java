package dev.strata.csi.node.agent;

import dev.strata.csi.agent.api.ContentStart;
import dev.strata.csi.agent.api.WriteContentResponse;
import dev.strata.csi.agent.api.WriteSnapshotCopyResponse;
import dev.strata.csi.backend.local.LocalSnapshotId;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.PoolSnapshots;
import dev.strata.csi.node.local.pool.Receiving;
import java.io.IOException;
import java.util.Optional;

/** What {@link ContentReceiver} writes into: RECEIVING volumes (WriteContent) and snapshot copies (WriteSnapshotCopy). */
final class ReceiveDestinations {

    private ReceiveDestinations() {}

    /** Volumes, locked by their names, in the pool with their records. */
    static ContentReceiver.Destination<WriteContentResponse> volumes(NodePools pools, Inventory inventory) {
        return new ContentReceiver.Destination<>() {
            @Override
            public String noun() {
                return "volume";
            }

            @Override
            public String logKey() {
                return "volume";
            }

            @Override
            public String lockKey(String name) {
                LocalVolumeId.checkName(name);
                return name;
            }

            @Override
            public Receiving receiving(String name) throws IOException {
                return pools.holding(name).incoming().target(name);
            }

            @Override
            public Optional<CrashPoint> written() {
                return Optional.empty();
            }

            @Override
            public WriteContentResponse finish(String name, ContentStart start, long writtenBytes) throws IOException {
                var volume = pools.holding(name).incoming().finish(name, start.getSizeBytes(), start.getFilesystem(), start.getUsedAsBlock(),
                        start.getEncrypted());
                return WriteContentResponse.newBuilder().setVolume(volume).setWrittenBytes(writtenBytes)
                        .setGeneration(inventory.volumeChanged(name)).build();
            }
        };
    }

    /** Snapshot copies, locked as snapshots are, in the pool with their records. */
    static ContentReceiver.Destination<WriteSnapshotCopyResponse> snapshotCopies(NodePools pools, Inventory inventory) {
        return new ContentReceiver.Destination<>() {
            @Override
            public String noun() {
                return "snapshot copy";
            }

            @Override
            public String logKey() {
                return "snapshot";
            }

            @Override
            public String lockKey(String name) {
                LocalSnapshotId.checkName(name);
                return PoolSnapshots.lockKey(name);
            }

            @Override
            public Receiving receiving(String name) throws IOException {
                return pools.holdingSnapshot(name).snapshotCopies().target(name);
            }

            @Override
            public Optional<CrashPoint> written() {
                return Optional.of(CrashPoint.SNAPSHOT_COPY_WRITTEN);
            }

            @Override
            public WriteSnapshotCopyResponse finish(String name, ContentStart start, long writtenBytes) throws IOException {
                var snapshot = pools.holdingSnapshot(name).snapshotCopies().finish(name, start);
                return WriteSnapshotCopyResponse.newBuilder().setSnapshot(snapshot).setWrittenBytes(writtenBytes)
                        .setGeneration(inventory.snapshotChanged(name)).build();
            }
        };
    }
}
