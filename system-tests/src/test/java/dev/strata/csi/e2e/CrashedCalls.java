package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.ServerProcess;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.function.Supplier;

/**
 * The calls of one crash scenario: when one fails because node-server reached the armed crash
 * point, node-server is started again (unarmed, launched as before) and the call repeated until it
 * succeeds, as the sidecars and kubelet retry. Any other failure fails the test. The kills,
 * restarts and retries go into the suite's {@link CrashTally}.
 */
final class CrashedCalls {

    private final Cluster cluster;
    private final String nodeId;
    /** Null: no point armed (a reboot scenario): every failure fails the test. */
    private final CrashPoint point;
    private final Cluster.Launch launch;
    private final String name;
    private final CrashTally tally;
    private boolean crashed;

    CrashedCalls(Cluster cluster, String nodeId, CrashPoint point, Cluster.Launch launch, String name, CrashTally tally) {
        this.cluster = cluster;
        this.nodeId = nodeId;
        this.point = point;
        this.launch = launch;
        this.name = name;
        this.tally = tally;
    }

    /** Whether node-server died at the armed point. */
    boolean crashed() {
        return crashed;
    }

    <T> T call(String rpc, Supplier<T> call) {
        try {
            return call.get();
        } catch (StatusRuntimeException failure) {
            ServerProcess process = cluster.node(nodeId).process();
            if (crashed || point == null || !exited(process)) {
                throw new AssertionError(name + ": " + rpc + " failed: " + failure.getStatus() + "\n" + cluster.logs(), failure);
            }
            // Once its output is all read: the last lines may still be on their way to the reader when the process is gone.
            try {
                assertEquals(Crashes.EXIT_STATUS, process.exitCode(), name + ": node-server's exit status\n" + process.output());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
            assertTrue(process.output().contains("crash point " + point + " reached"),
                    name + ": node-server died, but not at " + point + ":\n" + process.output());
            crashed = true;
            tally.killed();
            try {
                cluster.startNode(nodeId, launch);
            } catch (Exception e) {
                throw new AssertionError(name + ": node-server did not start again after the crash\n" + cluster.logs(), e);
            }
            tally.restarted();
            return retry(rpc, call);
        }
    }

    private <T> T retry(String rpc, Supplier<T> call) {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            tally.retried();
            try {
                return call.get();
            } catch (StatusRuntimeException e) {
                Status.Code code = e.getStatus().getCode();
                boolean transient_ = code == Status.Code.UNAVAILABLE || code == Status.Code.ABORTED;
                if (!transient_ || System.nanoTime() > deadline) {
                    throw new AssertionError(name + ": " + rpc + " retried after the crash at " + point + " failed: "
                            + e.getStatus() + "\n" + cluster.logs(), e);
                }
            }
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
    }

    private static boolean exited(ServerProcess process) {
        try {
            for (int i = 0; i < 100 && process.isAlive(); i++) {
                Thread.sleep(50);
            }
            return !process.isAlive();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
