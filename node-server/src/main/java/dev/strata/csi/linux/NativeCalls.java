package dev.strata.csi.linux;

import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs calls into native libraries on platform threads while the caller waits. The gRPC handlers
 * are virtual threads, and a virtual thread inside native code pins its carrier thread (the JDK
 * compensates for its own file I/O, not for foreign calls): with one carrier per core, two slow
 * mounts would otherwise stall every other call, health checks included. A call that does not
 * return within {@link #TIMEOUT} is reported as failed, as the program it replaces was killed
 * then; the kernel may still complete it, and callers re-read the kernel's state before acting.
 */
public final class NativeCalls {

    /** Long enough for a journal replay at mount, or fallocate of a large image. */
    public static final Duration TIMEOUT = Duration.ofMinutes(2);

    private final ExecutorService threads = Executors.newCachedThreadPool(
            Thread.ofPlatform().name("native-call-", 0).daemon().factory());

    /** Thrown when a call does not come back in time or the wait is interrupted. */
    public static final class Unfinished extends Exception {
        Unfinished(String message) {
            super(message);
        }
    }

    /** The result of {@code call}, run on a platform thread; {@code name} is for messages. */
    public <T> T run(String name, Callable<T> call) throws Unfinished {
        Future<T> done = threads.submit(call);
        try {
            return done.get(TIMEOUT.toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new Unfinished("did not return within " + TIMEOUT.toSeconds() + " s; the kernel may still complete it");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Unfinished("interrupted while waiting for it; the kernel may still complete it");
        } catch (ExecutionException e) {
            throw new IllegalStateException("native call " + name + " failed", e.getCause());
        }
    }
}
