package dev.strata.csi.system;

import dev.strata.csi.flags.UsageException;
import dev.strata.csi.log.Log;
import java.util.Optional;
import java.util.Set;

/**
 * Test-only crash injection: with {@value #ENVIRONMENT} set to the name of one of a program's crash
 * points (node-server's local ones, controller-server's NFS ones: each program its own enum), the
 * process halts at once when it reaches that point, as a SIGKILL or a power cut would stop it (no
 * shutdown hooks, no finally blocks). Unset, as everywhere but in the crash tests, reaching a point
 * is one comparison. Never set it in a deployment.
 */
public final class Crashes<P extends Enum<P>> {

    public static final String ENVIRONMENT = "STRATA_TEST_CRASH_AT";
    /** The exit status of a halted process, as a shell reports a SIGKILL. */
    public static final int EXIT_STATUS = 137;

    private final Optional<P> armed;

    private Crashes(Optional<P> armed) {
        this.armed = armed;
    }

    /** Never halts. */
    public static <P extends Enum<P>> Crashes<P> none() {
        return new Crashes<P>(Optional.empty());
    }

    /**
     * Armed at the point of {@code points} that {@value #ENVIRONMENT} names, with a warning in the
     * log; a name that is no point is a usage error.
     */
    public static <P extends Enum<P>> Crashes<P> fromEnvironment(Class<P> points, Log log) throws UsageException {
        return fromEnvironment(points, Set.of(), log);
    }

    /**
     * As {@link #fromEnvironment(Class, Log)}, in a program with crash points of several parts,
     * each its own enum: a name of {@code others} (the other parts' points) arms none of these.
     */
    public static <P extends Enum<P>> Crashes<P> fromEnvironment(Class<P> points, Set<String> others, Log log)
            throws UsageException {
        String name = System.getenv(ENVIRONMENT);
        if (name == null || name.isEmpty() || others.contains(name)) {
            return none();
        }
        P point;
        try {
            point = Enum.valueOf(points, name);
        } catch (IllegalArgumentException e) {
            throw new UsageException(ENVIRONMENT + " names no crash point: " + e.getMessage());
        }
        log.warn("test-only crash point armed: this process halts when it reaches it", "point", point, "variable", ENVIRONMENT);
        return new Crashes<>(Optional.of(point));
    }

    /** Halts the process if armed at {@code point}. */
    public void reach(P point) {
        if (armed.isPresent() && armed.get() == point) {
            System.err.println("crash point " + point + " reached: halting");
            System.err.flush();
            Runtime.getRuntime().halt(EXIT_STATUS);
        }
    }
}
