package dev.strata.csi.linux;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs work that calls into native libraries (system calls, libblkid) on a platform thread. The
 * gRPC handlers are virtual threads, and a virtual thread inside native code pins its carrier
 * thread (the JDK compensates for its own file I/O, not for foreign calls): with one carrier per
 * core, two slow unmounts would otherwise stall every other call, health checks included.
 *
 * <p>A platform thread runs the work itself, so a whole operation (an attach is eight calls) is
 * handed over once, not call by call: on a busy node every hand-over is a wait for a core. Work
 * that does not finish within {@link #TIMEOUT} is reported as failed, as the program it replaces
 * was killed then; the kernel may still complete it, and callers re-read the kernel's state
 * before acting.
 */
public final class NativeCalls {

    /** Long enough for a journal replay at mount, or fallocate of a large image. */
    public static final Duration TIMEOUT = Duration.ofMinutes(2);

    /** Work that may fail with {@code E}. */
    @FunctionalInterface
    public interface Work<T, E extends Exception> {
        T run() throws E;
    }

    /** Thrown when work does not finish in time or the wait for it is interrupted. */
    public static final class Unfinished extends Exception {
        Unfinished(String message) {
            super(message);
        }
    }

    private final ExecutorService threads = Executors.newCachedThreadPool(
            Thread.ofPlatform().name("native-call-", 0).daemon().factory());

    /**
     * The result of {@code work}: run here on a platform thread, else on one of this class's
     * while the virtual thread waits. {@code failure} is the checked exception the work throws.
     */
    public <T, E extends Exception> T run(Class<E> failure, Work<T, E> work) throws E, Unfinished {
        if (!Thread.currentThread().isVirtual()) {
            return work.run();
        }
        Future<T> done = threads.submit(work::run);
        try {
            return done.get(TIMEOUT.toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new Unfinished("did not finish within " + TIMEOUT.toSeconds() + " s; the kernel may still complete it");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Unfinished("interrupted while waiting for it; the kernel may still complete it");
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (failure.isInstance(cause)) {
                throw failure.cast(cause);
            }
            if (cause instanceof RuntimeException runtime) {
                throw runtime;
            }
            if (cause instanceof Error error) {
                throw error;
            }
            throw new IllegalStateException(cause);
        }
    }
}
