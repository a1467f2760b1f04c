package dev.strata.csi.node.local.pool;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * One step for each of several volumes at once (a platform thread each), waiting for all: a group
 * snapshot's freezes, copies and thaws, whose time the group's writers wait. Not virtual threads:
 * the steps block in system calls made through jnr-ffi, which pin a virtual thread's carrier, so
 * only as many ran at once as there are cores (16 freezes on 2 cores took 8 times one). The first
 * failure is thrown once every step has ended.
 */
public final class Concurrently {

    private Concurrently() {}

    @FunctionalInterface
    public interface Step<T> {
        void run(T item) throws IOException, DeviceException, MountException;
    }

    public static <T> void run(List<T> items, Step<T> step) throws IOException, DeviceException, MountException {
        if (items.size() == 1) {
            step.run(items.getFirst());
            return;
        }
        List<Future<Void>> running = new ArrayList<>();
        // Every thread started before any step: on busy cores, starting 16 threads takes longer than a step.
        CountDownLatch started = new CountDownLatch(items.size());
        try (ExecutorService threads = Executors.newThreadPerTaskExecutor(Thread.ofPlatform().name("volume-step-", 0).factory())) {
            for (T item : items) {
                running.add(threads.submit(() -> {
                    started.countDown();
                    started.await(1, TimeUnit.SECONDS); // bounded: a thread that could not be started must not hold the others
                    step.run(item);
                    return null;
                }));
            }
        }
        Throwable failed = null;
        for (Future<Void> one : running) {
            try {
                one.get();
            } catch (ExecutionException e) {
                failed = failed == null ? e.getCause() : failed;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("interrupted", e);
            }
        }
        switch (failed) {
            case null -> { }
            case IOException e -> throw e;
            case DeviceException e -> throw e;
            case MountException e -> throw e;
            case RuntimeException e -> throw e;
            case Error e -> throw e;
            default -> throw new IOException(failed);
        }
    }
}
