package dev.strata.csi.rpc;

import io.grpc.Status;
import io.grpc.stub.CallStreamObserver;
import java.time.Duration;

/**
 * Flow control for a thread that writes a long gRPC stream: it waits until the stream takes more
 * (isReady), woken by the stream's onReady handler, so no more than the transport's window is
 * ever buffered, however fast the writer reads. A stream whose other side takes nothing for
 * {@code stall} ends the wait with UNAVAILABLE; one that failed ({@link #fail}) with its status.
 */
public final class StreamReadiness implements Runnable {

    private final CallStreamObserver<?> stream;
    private final Duration stall;
    private Status failed;

    /**
     * Becomes {@code stream}'s onReady handler: construct it where gRPC allows setting one (in the
     * service method, or in a client's {@code beforeStart}).
     */
    public StreamReadiness(CallStreamObserver<?> stream, Duration stall) {
        this.stream = stream;
        this.stall = stall;
        stream.setOnReadyHandler(this);
    }

    /** The onReady handler. */
    @Override
    public synchronized void run() {
        notifyAll();
    }

    /** The stream ended (cancelled, failed): a waiting writer gives up with {@code status}. */
    public synchronized void fail(Status status) {
        if (failed == null) {
            failed = status;
        }
        notifyAll();
    }

    /** Waits until the stream takes another message. */
    public synchronized void await() throws InterruptedException {
        long deadline = System.nanoTime() + stall.toNanos();
        while (!stream.isReady()) {
            if (failed != null) {
                throw failed.asRuntimeException();
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw CsiException.unavailable("the other side of the stream took nothing for " + stall.toSeconds() + " s");
            }
            wait(Math.max(1, Math.min(left / 1_000_000, 1000)));
        }
        if (failed != null) {
            throw failed.asRuntimeException();
        }
    }
}
