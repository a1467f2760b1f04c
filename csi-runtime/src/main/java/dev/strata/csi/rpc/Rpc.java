package dev.strata.csi.rpc;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;

/** Answers a unary call from a function, mapping failures to the status the caller gets. */
public final class Rpc {

    private Rpc() {}

    @FunctionalInterface
    public interface Handler<T> {
        T handle() throws Exception;
    }

    /**
     * Replies with what {@code handler} returns. A {@link CsiException} becomes its status; a
     * status from a downstream call (the node agent) passes through; a checked exception (a tool
     * or the kernel said no; its message is one line) is INTERNAL with what it says
     * ({@link CsiException#describe}: no Java class names); a runtime
     * exception is a bug, rethrown for the call log to record with its stack trace.
     */
    public static <T> void answer(StreamObserver<T> response, Handler<T> handler) {
        T reply;
        try {
            reply = handler.handle();
        } catch (RuntimeException e) {
            if (!(e instanceof CsiException) && !(e instanceof StatusRuntimeException)) {
                throw e;
            }
            response.onError(status(e).asRuntimeException());
            return;
        } catch (Exception e) {
            response.onError(status(e).asRuntimeException());
            return;
        }
        response.onNext(reply);
        response.onCompleted();
    }

    /**
     * The status a caller gets for a failure that is no bug, as {@link #answer} maps it: for the
     * steps of a streaming call. An interrupt is kept for the thread to see.
     */
    public static Status status(Exception e) {
        return switch (e) {
            case CsiException csi -> csi.toStatus();
            case StatusRuntimeException downstream -> downstream.getStatus();
            case InterruptedException interrupted -> {
                Thread.currentThread().interrupt();
                yield CsiException.aborted("interrupted; retry").toStatus();
            }
            default -> CsiException.internal(CsiException.describe(e)).toStatus();
        };
    }
}
