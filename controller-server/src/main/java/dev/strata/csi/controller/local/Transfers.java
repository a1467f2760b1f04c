package dev.strata.csi.controller.local;

import dev.strata.csi.rpc.CsiException;
import io.grpc.Context;
import io.grpc.Deadline;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Copies of volume content across nodes, each on a thread of its own, by volume name. A copy takes
 * as long as the volume's data needs, often longer than external-provisioner waits for
 * CreateVolume (its --timeout): the call waits while it may, then answers ABORTED with the
 * progress, and the copy goes on; the retried call, which the provisioner makes with the same
 * name, waits for the same copy ({@link #join}) instead of starting another. A copy that failed
 * is started again by the next call (the target node resumes what it has on disk). A snapshot's
 * copies to other nodes run here too ({@link SnapshotCopies}), started without waiting.
 *
 * @param <R> what a copy makes: a volume, or a snapshot's copy
 */
final class Transfers<R> {

    /** What a copy runs; {@code progress} counts the bytes relayed. */
    @FunctionalInterface
    interface Copy<R> {
        R run(AtomicLong progress) throws Exception;
    }

    /** A copy's result: what it made on {@code nodeId}. */
    record Copied<R>(String nodeId, R volume) {}

    private record Job<R>(String nodeId, String description, CompletableFuture<R> result, AtomicLong progress, Thread[] thread) {}

    /** Answered before the caller's deadline, so that the answer reaches it. */
    private static final long MARGIN_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final Map<String, Job<R>> running = new ConcurrentHashMap<>();

    /** The copy running for {@code name}, once complete; empty when none runs. */
    Optional<Copied<R>> join(String name) throws Exception {
        Job<R> job = running.get(name);
        return job == null ? Optional.empty() : Optional.of(new Copied<>(job.nodeId(), waitFor(name, job)));
    }

    /** What {@code copy} makes on {@code nodeId}, once made; the copy running for {@code name}, or {@code copy} started. */
    R await(String name, String nodeId, String description, Copy<R> copy) throws Exception {
        return waitFor(name, start(name, nodeId, description, copy));
    }

    /** The copy running for {@code name}, or {@code copy} started for it; without waiting for it. */
    private Job<R> start(String name, String nodeId, String description, Copy<R> copy) {
        Job<R> started = new Job<>(nodeId, description, new CompletableFuture<>(), new AtomicLong(), new Thread[1]);
        Job<R> existing = running.putIfAbsent(name, started);
        if (existing != null) {
            return existing;
        }
        synchronized (started) {
            started.thread()[0] = Thread.ofPlatform().daemon(true).name("copy-" + name).start(() -> {
                try {
                    started.result().complete(copy.run(started.progress()));
                } catch (Throwable t) {
                    started.result().completeExceptionally(t);
                } finally {
                    running.remove(name, started);
                }
            });
        }
        return started;
    }

    /** Starts {@code copy} for {@code name} in the background unless one runs: the caller does not wait. */
    void startIfIdle(String name, String nodeId, String description, Copy<R> copy) {
        start(name, nodeId, description, copy);
    }

    /** Whether a copy runs for {@code name}. */
    boolean running(String name) {
        return running.containsKey(name);
    }

    /** Stops the copy running for {@code name}, if any (interrupted: its streams are cancelled, the target keeps what it has). */
    void stop(String name) {
        Job<R> job = running.get(name);
        if (job != null) {
            synchronized (job) {
                if (job.thread()[0] != null) {
                    job.thread()[0].interrupt();
                }
            }
            try {
                job.result().get(ContentRelay.STALL.toSeconds(), TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (ExecutionException | TimeoutException e) {
                // it ended, or is ending: what it left the caller deletes
            }
        }
    }

    private static <R> R waitFor(String name, Job<R> job) throws Exception {
        Context call = Context.current();
        Deadline deadline = call.getDeadline();
        while (true) {
            long slice = TimeUnit.SECONDS.toNanos(1);
            if (deadline != null) {
                slice = Math.min(slice, deadline.timeRemaining(TimeUnit.NANOSECONDS) - MARGIN_NANOS);
            }
            if (slice <= 0 || call.isCancelled()) {
                throw CsiException.aborted("volume " + name + " is being made on node " + job.nodeId() + ": " + job.description()
                        + ", " + job.progress().get() + " bytes so far; the copy goes on, retry");
            }
            try {
                return job.result().get(slice, TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                // wait on, while the caller does
            } catch (ExecutionException e) {
                throw e.getCause() instanceof Exception cause ? cause : e;
            }
        }
    }
}
