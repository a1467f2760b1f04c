package dev.strata.csi.controller.local;

import dev.strata.csi.backend.local.LocalTopology;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.controller.nfs.NfsCrashPoint;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.server.DriverProgram;
import dev.strata.csi.system.Crashes;
import java.util.Optional;

/**
 * The local backend of controller-server: placement over the node agents that registered with
 * it, and the relay of copies between nodes. It has no flags of its own; the agents' are
 * controller-server's, since the Controller service checks a node's agent for every backend.
 * ControllerServer names it in one line.
 */
public final class LocalControllerWiring {

    private LocalControllerWiring() {}

    public static LocalController fromFlags(DriverProgram.Context context, AgentDirectory agents) throws UsageException {
        RelayMetrics metrics = new RelayMetrics(context.metrics());
        Crashes<LocalCrashPoint> crashes = Crashes.fromEnvironment(LocalCrashPoint.class, NfsCrashPoint.names(), context.log());
        LocalController local = new LocalController(agents, LocalTopology.forDriver(context.plugin().name()),
                new ContentRelay(metrics, context.log()), crashes, context.log());
        SnapshotCopies copies = local.snapshotCopies();
        metrics.watch(copies::unready);
        // A node back: the copies of snapshots deleted while it was down go at once.
        agents.onReported(nodeId -> {
            try {
                copies.reconcileTombstones(Optional.of(nodeId));
            } catch (RuntimeException e) {
                context.log().warn("cannot delete the copies of deleted snapshots on a node back", "node", nodeId,
                        "reason", String.valueOf(e.getMessage()));
            }
        });
        // Copies no call waits for: after a restart of this controller, or a node back from down.
        Thread.ofPlatform().daemon().name("snapshot-copies").start(() -> {
            while (true) {
                try {
                    Thread.sleep(SnapshotCopies.RECONCILE_EVERY);
                    copies.reconcile();
                } catch (InterruptedException e) {
                    return;
                } catch (RuntimeException e) {
                    context.log().warn("snapshot copies: reconcile pass failed", "reason", String.valueOf(e.getMessage()));
                }
            }
        });
        return local;
    }
}
