package dev.strata.csi.rpc;

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
        } catch (CsiException e) {
            response.onError(e.toStatus().asRuntimeException());
            return;
        } catch (StatusRuntimeException e) {
            response.onError(e.getStatus().asRuntimeException());
            return;
        } catch (RuntimeException e) {
            throw e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            response.onError(CsiException.aborted("interrupted; retry").toStatus().asRuntimeException());
            return;
        } catch (Exception e) {
            response.onError(CsiException.internal(CsiException.describe(e)).toStatus().asRuntimeException());
            return;
        }
        response.onNext(reply);
        response.onCompleted();
    }
}
