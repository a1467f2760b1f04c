package dev.strata.csi.e2e;

/**
 * What a crash suite has done so far, for its progress lines and its closing line: the scenarios
 * run, node-server's kills at the armed points and its restarts, the calls retried after a crash,
 * and the time since the suite started.
 */
final class CrashTally {

    private final long started = System.nanoTime();
    private int scenarios;
    private int kills;
    private int restarts;
    private int retries;

    /** A scenario starts: node-server restarted with its crash point armed. */
    void scenario() {
        scenarios++;
        restarts++;
    }

    /** node-server died at the armed point. */
    void killed() {
        kills++;
    }

    /** node-server started again: after a crash, or by the suite itself. */
    void restarted() {
        restarts++;
    }

    /** A call repeated after a crash. */
    void retried() {
        retries++;
    }

    int scenarios() {
        return scenarios;
    }

    int kills() {
        return kills;
    }

    int restarts() {
        return restarts;
    }

    int retries() {
        return retries;
    }

    double seconds() {
        return (System.nanoTime() - started) / 1e9;
    }
}
