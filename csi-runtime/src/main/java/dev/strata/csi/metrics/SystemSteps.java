package dev.strata.csi.metrics;

import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;

/**
 * How long the system steps behind the calls take (mkfs, mount, losetup, ...), by step, and how
 * often they fail: where a slow call spends its time.
 */
public final class SystemSteps {

    /** One system step; returns what the step returns. */
    @FunctionalInterface
    public interface Step<T, E extends Exception> {
        T run() throws E;
    }

    /** One system step with nothing to return. */
    @FunctionalInterface
    public interface Action<E extends Exception> {
        void run() throws E;
    }

    private final Histogram seconds;
    private final Counter failures;

    public SystemSteps(PrometheusRegistry registry) {
        seconds = Histogram.builder()
                .name("strata_system_step_seconds")
                .help("Duration of the system steps the driver runs (mkfs, mount, losetup, ...), by step")
                .labelNames("step")
                .classicOnly()
                .classicUpperBounds(Buckets.OPERATIONS)
                .register(registry);
        failures = Counter.builder()
                .name("strata_system_step_failures_total")
                .help("System steps that failed, by step")
                .labelNames("step")
                .register(registry);
    }

    public <T, E extends Exception> T time(String step, Step<T, E> body) throws E {
        long start = System.nanoTime();
        boolean ok = false;
        try {
            T result = body.run();
            ok = true;
            return result;
        } finally {
            record(step, start, ok);
        }
    }

    public <E extends Exception> void time(String step, Action<E> body) throws E {
        time(step, () -> {
            body.run();
            return null;
        });
    }

    /** Records a step timed by the caller (one that is not always run, such as mkfs by format-if-blank). */
    public void record(String step, long startNanos, boolean ok) {
        seconds.labelValues(step).observe((System.nanoTime() - startNanos) / 1e9);
        if (!ok) {
            failures.labelValues(step).inc();
        }
    }
}
