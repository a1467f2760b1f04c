package dev.strata.csi.server;

import java.time.Duration;

/**
 * A round of work done once at start (in the component order: before the CSI socket opens) and
 * then every period on a daemon thread of its own, until stopped. A round catches its own errors:
 * one that fails waits for the next.
 */
public final class Periodic implements Component {

    private final String name;
    private final Duration period;
    private final Runnable round;
    private Thread loop;

    /** {@code period} of zero: the round at start only. */
    public Periodic(String name, Duration period, Runnable round) {
        this.name = name;
        this.period = period;
        this.round = round;
    }

    @Override
    public void start() {
        round.run();
        if (period.isZero()) {
            return;
        }
        loop = Thread.ofPlatform().daemon(true).name(name).start(() -> {
            try {
                while (true) {
                    Thread.sleep(period);
                    round.run();
                }
            } catch (InterruptedException e) {
                // stopped
            }
        });
    }

    @Override
    public void stop(Duration grace) {
        if (loop != null) {
            loop.interrupt();
            try {
                loop.join(grace.toMillis() + 1);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
