package dev.strata.csi.server;

import java.time.Duration;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Supplier;

/**
 * A round of work done once at start and then every period on a daemon thread of its own, until
 * stopped. A round catches its own errors: one that fails waits for the next.
 */
public final class Periodic implements Component {

    private final String name;
    private final Supplier<Duration> period;
    private final Runnable round;
    private final boolean firstRoundAtStart;
    private volatile Thread loop;

    /**
     * The first round in {@link #start} (in the component order: before the CSI socket opens), then
     * one every {@code period}; a period of zero: the round at start only.
     */
    public Periodic(String name, Duration period, Runnable round) {
        this(name, () -> period, round, true);
    }

    /**
     * A round every {@code period} as it is when each wait begins, and again when
     * {@link #reschedule} says it changed. The first round runs in {@link #start} when
     * {@code firstRoundAtStart}, else at once on the loop's thread, so that a slow one does not hold
     * up the start.
     */
    public Periodic(String name, Supplier<Duration> period, Runnable round, boolean firstRoundAtStart) {
        this.name = name;
        this.period = period;
        this.round = round;
        this.firstRoundAtStart = firstRoundAtStart;
    }

    @Override
    public void start() {
        if (firstRoundAtStart) {
            round.run();
        }
        loop = Thread.ofPlatform().daemon(true).name(name).start(() -> {
            if (!firstRoundAtStart) {
                round.run();
            }
            while (!period.get().isZero() && awaitPeriod()) {
                round.run();
            }
        });
    }

    /** Waits a period from now, measured again whenever woken; false when stopped meanwhile. */
    private boolean awaitPeriod() {
        long from = System.nanoTime();
        long remaining;
        while ((remaining = from + period.get().toNanos() - System.nanoTime()) > 0) {
            LockSupport.parkNanos(this, remaining);
            if (Thread.currentThread().isInterrupted()) {
                return false;
            }
        }
        return !Thread.currentThread().isInterrupted();
    }

    /** The period changed: the wait under way is measured against it now (a shorter one ends sooner). */
    public void reschedule() {
        Thread running = loop;
        if (running != null) {
            LockSupport.unpark(running);
        }
    }

    @Override
    public void stop(Duration grace) {
        Thread running = loop;
        if (running != null) {
            running.interrupt();
            try {
                running.join(grace.toMillis() + 1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
