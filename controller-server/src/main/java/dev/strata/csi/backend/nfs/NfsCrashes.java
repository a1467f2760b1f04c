package dev.strata.csi.backend.nfs;

import java.util.Optional;

/**
 * Test-only crash injection for controller-server's NFS steps, as node-server's Crashes is for its
 * local ones (the same environment variable, each program with its own points): with
 * {@value #ENVIRONMENT} set to an {@link NfsCrashPoint}'s name, the process halts at once when it
 * reaches that point, as a SIGKILL would stop it. Unset, reaching a point is one comparison. Never
 * set it in a deployment.
 */
public final class NfsCrashes {

    public static final String ENVIRONMENT = "STRATA_TEST_CRASH_AT";
    /** The exit status of a halted process, as a shell reports a SIGKILL. */
    public static final int EXIT_STATUS = 137;
    public static final NfsCrashes NONE = new NfsCrashes(Optional.empty());

    private final Optional<NfsCrashPoint> armed;

    private NfsCrashes(Optional<NfsCrashPoint> armed) {
        this.armed = armed;
    }

    /** Armed at the point {@value #ENVIRONMENT} names; IllegalArgumentException for a name that is none. */
    public static NfsCrashes fromEnvironment() {
        String point = System.getenv(ENVIRONMENT);
        return point == null || point.isEmpty() ? NONE : new NfsCrashes(Optional.of(NfsCrashPoint.valueOf(point)));
    }

    public Optional<NfsCrashPoint> armed() {
        return armed;
    }

    void reach(NfsCrashPoint point) {
        if (armed.isPresent() && armed.get() == point) {
            System.err.println("crash point " + point + " reached: halting");
            System.err.flush();
            Runtime.getRuntime().halt(EXIT_STATUS);
        }
    }
}
