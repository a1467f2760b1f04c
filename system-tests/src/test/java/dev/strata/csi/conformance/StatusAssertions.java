package dev.strata.csi.conformance;

import static org.junit.jupiter.api.Assertions.fail;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.util.Set;
import org.junit.jupiter.api.function.Executable;

/** Asserts the gRPC status code a CSI call ends with; the spec defines most errors by code alone. */
final class StatusAssertions {

    private StatusAssertions() {}

    /** {@code call} describes the request for the failure message, e.g. "CreateVolume without name". */
    static void assertCode(Status.Code expected, String call, Executable rpc) {
        assertCodeIn(Set.of(expected), call, rpc);
    }

    static void assertCodeIn(Set<Status.Code> allowed, String call, Executable rpc) {
        Status status = statusOf(rpc);
        if (!allowed.contains(status.getCode())) {
            fail(call + ": expected " + (allowed.size() == 1 ? allowed.iterator().next() : "one of " + allowed)
                    + ", got " + status.getCode() + (status.getDescription() == null ? "" : " (" + status.getDescription() + ")"));
        }
    }

    private static Status statusOf(Executable rpc) {
        try {
            rpc.execute();
            return Status.OK;
        } catch (StatusRuntimeException e) {
            return e.getStatus();
        } catch (Throwable e) {
            throw new AssertionError("not a gRPC failure", e);
        }
    }
}
