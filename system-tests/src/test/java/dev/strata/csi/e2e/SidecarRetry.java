package dev.strata.csi.e2e;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.function.Supplier;

/**
 * A call asked again as the kubernetes-csi sidecars ask it (external-provisioner, external-attacher):
 * while the answer is ABORTED (an operation on the volume is in flight, such as a copy between
 * nodes finishing) or UNAVAILABLE, until a deadline. Any other answer ends it.
 */
final class SidecarRetry {

    private SidecarRetry() {}

    static <T> T untilDone(Duration limit, Supplier<T> call) throws InterruptedException {
        long deadline = System.nanoTime() + limit.toNanos();
        while (true) {
            try {
                return call.get();
            } catch (StatusRuntimeException e) {
                Status.Code code = e.getStatus().getCode();
                if (code != Status.Code.ABORTED && code != Status.Code.UNAVAILABLE || System.nanoTime() > deadline) {
                    throw e;
                }
                System.out.println("asked again after " + e.getStatus());
                Thread.sleep(500);
            }
        }
    }
}
