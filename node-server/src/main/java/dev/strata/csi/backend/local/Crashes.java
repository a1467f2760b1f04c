package dev.strata.csi.backend.local;

import java.util.Optional;

/**
 * Test-only crash injection: with {@value #ENVIRONMENT} set to a {@link CrashPoint}'s name,
 * node-server halts at once when it reaches that point, as a SIGKILL or a power cut would stop it
 * (no shutdown hooks, no finally blocks). Unset, as everywhere but in the crash tests, reaching a
 * point is one comparison. Never set it in a deployment.
 */
public final class Crashes {

    public static final String ENVIRONMENT = "STRATA_TEST_CRASH_AT";
    /** The exit status of a halted process, as a shell reports a SIGKILL. */
    public static final int EXIT_STATUS = 137;
    public static final Crashes NONE = new Crashes(Optional.empty());

    private final Optional<CrashPoint> armed;

    Crashes(Optional<CrashPoint> armed) {
        this.armed = armed;
    }

    /** Armed at the point {@value #ENVIRONMENT} names; IllegalArgumentException for a name that is none. */
    public static Crashes fromEnvironment() {
        String point = System.getenv(ENVIRONMENT);
        return point == null || point.isEmpty() ? NONE : new Crashes(Optional.of(CrashPoint.valueOf(point)));
    }

    public Optional<CrashPoint> armed() {
        return armed;
    }

    /** Halts the process if armed at {@code point}. */
    public void reach(CrashPoint point) {
        if (armed.isPresent() && armed.get() == point) {
            System.err.println("crash point " + point + " reached: halting");
            System.err.flush();
            Runtime.getRuntime().halt(EXIT_STATUS);
        }
    }
}
