package dev.strata.csi.controller.agents;

import dev.strata.csi.rpc.CsiException;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The node agents that let a call pass its deadline and have not answered a probe since: a stopped
 * node-server, a node whose kernel is stuck. Calls that need such a node fail at once (UNAVAILABLE,
 * naming it) instead of each waiting out its deadline; calls for other nodes never wait for it.
 * An agent that is only busy (a long copy in its pool) answers the probe at once and is cleared.
 */
final class Responsiveness {

    private final Map<String, Instant> silentSince = new ConcurrentHashMap<>();
    private final Set<String> probing = ConcurrentHashMap.newKeySet();
    private final Duration callTimeout;
    private final Clock clock;

    Responsiveness(Duration callTimeout, Clock clock) {
        this.callTimeout = callTimeout;
        this.clock = clock;
    }

    /** UNAVAILABLE, naming the node, while its agent is marked as not answering. */
    void requireAnswering(String nodeId) {
        Instant since = silentSince.get(nodeId);
        if (since != null) {
            throw CsiException.unavailable("the node agent of " + nodeId + " has not answered since " + since
                    + " (a call passed its " + callTimeout.toSeconds() + " s deadline); calls that need node " + nodeId
                    + " fail until it answers again");
        }
    }

    /** The message of a call that passed its deadline. */
    String timedOut(String nodeId, Duration deadline) {
        silentSince.putIfAbsent(nodeId, clock.instant());
        return "the node agent of " + nodeId + " did not answer within " + deadline.toSeconds()
                + " s; calls that need node " + nodeId + " fail until it answers again";
    }

    boolean silent(String nodeId) {
        return silentSince.containsKey(nodeId);
    }

    Set<String> silent() {
        return Set.copyOf(silentSince.keySet());
    }

    /** Whether a probe of {@code nodeId} may start now: it is marked and none is in flight. */
    boolean startProbe(String nodeId) {
        return silentSince.containsKey(nodeId) && probing.add(nodeId);
    }

    void probeEnded(String nodeId, boolean answered) {
        if (answered) {
            silentSince.remove(nodeId);
        }
        probing.remove(nodeId);
    }

    /** A node forgotten, or registered by a new agent process: what the old one did says nothing now. */
    void forget(String nodeId) {
        silentSince.remove(nodeId);
    }
}
