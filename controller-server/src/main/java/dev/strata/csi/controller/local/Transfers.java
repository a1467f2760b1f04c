package dev.strata.csi.controller.local;

import dev.strata.csi.agent.api.Volume;
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
 * is started again by the next call (the target node resumes what it has on disk).
 */
final class Transfers {

    /** What a copy runs; {@code progress} counts the bytes relayed. */
    @FunctionalInterface
    interface Copy {
        Volume run(AtomicLong progress) throws Exception;
    }

    /** A copy's result: the volume it made on {@code nodeId}. */
    record Copied(String nodeId, Volume volume) {}

    private record Job(String nodeId, String description, CompletableFuture<Volume> result, AtomicLong progress) {}

    /** Answered before the caller's deadline, so that the answer reaches it. */
    private static final long MARGIN_NANOS = TimeUnit.SECONDS.toNanos(1);

    private final Map<String, Job> running = new ConcurrentHashMap<>();

    /** The copy running for {@code name}, once complete; empty when none runs. */
    Optional<Copied> join(String name) throws Exception {
        Job job = running.get(name);
        return job == null ? Optional.empty() : Optional.of(new Copied(job.nodeId(), waitFor(name, job)));
    }

    /** The volume {@code copy} makes on {@code nodeId}, once made; the copy running for {@code name}, or {@code copy} started. */
    Volume await(String name, String nodeId, String description, Copy copy) throws Exception {
        Job started = new Job(nodeId, description, new CompletableFuture<>(), new AtomicLong());
        Job existing = running.putIfAbsent(name, started);
        if (existing != null) {
            return waitFor(name, existing);
        }
        Thread.ofPlatform().daemon(true).name("copy-" + name).start(() -> {
            try {
                started.result().complete(copy.run(started.progress()));
            } catch (Throwable t) {
                started.result().completeExceptionally(t);
            } finally {
                running.remove(name, started);
            }
        });
        return waitFor(name, started);
    }

    private static Volume waitFor(String name, Job job) throws Exception {
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
