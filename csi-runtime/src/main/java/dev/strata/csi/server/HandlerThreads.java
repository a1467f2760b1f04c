package dev.strata.csi.server;

import io.grpc.Context;
import io.grpc.ForwardingServerCallListener.SimpleForwardingServerCallListener;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import java.util.ArrayDeque;
import java.util.Queue;
import java.util.concurrent.Executor;

/**
 * Runs each call's handler on a thread of its own, and nothing else off the transport thread.
 * gRPC's callbacks (interceptors, reading the request) run directly on the Netty event loop,
 * which is cheap; only the handler, which waits for the kernel, tools and agents, moves to a
 * thread of the given executor, with the call's context (deadline, cancellation). gRPC would
 * otherwise hand every callback of a call to the executor one by one, several per unary call,
 * and on a busy node every hand-over is a wait for a core.
 *
 * <p>Callbacks that arrive while the handler runs (cancellation, completion) are queued and
 * delivered after it, in order, so a listener never sees two callbacks at once, as gRPC promises.
 */
final class HandlerThreads implements ServerInterceptor {

    private final Executor threads;

    HandlerThreads(Executor threads) {
        this.threads = threads;
    }

    @Override
    public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(
            ServerCall<ReqT, RespT> call, Metadata headers, ServerCallHandler<ReqT, RespT> next) {
        return new Offloading<>(next.startCall(call, headers));
    }

    private final class Offloading<ReqT> extends SimpleForwardingServerCallListener<ReqT> {
        private final Queue<Runnable> pending = new ArrayDeque<>();
        private boolean handlerRunning;

        Offloading(ServerCall.Listener<ReqT> delegate) {
            super(delegate);
        }

        @Override
        public void onMessage(ReqT message) {
            inOrder(() -> super.onMessage(message));
        }

        @Override
        public void onHalfClose() {
            synchronized (pending) {
                if (handlerRunning) {
                    pending.add(super::onHalfClose);
                    return;
                }
                handlerRunning = true;
            }
            threads.execute(Context.current().wrap(() -> {
                try {
                    super.onHalfClose();
                } finally {
                    drain();
                }
            }));
        }

        @Override
        public void onCancel() {
            inOrder(super::onCancel);
        }

        @Override
        public void onComplete() {
            inOrder(super::onComplete);
        }

        @Override
        public void onReady() {
            inOrder(super::onReady);
        }

        /** Runs {@code callback} now, or after the handler while it runs. */
        private void inOrder(Runnable callback) {
            synchronized (pending) {
                if (handlerRunning) {
                    pending.add(callback);
                    return;
                }
            }
            callback.run();
        }

        private void drain() {
            while (true) {
                Runnable next;
                synchronized (pending) {
                    next = pending.poll();
                    if (next == null) {
                        handlerRunning = false;
                        return;
                    }
                }
                next.run();
            }
        }
    }
}
