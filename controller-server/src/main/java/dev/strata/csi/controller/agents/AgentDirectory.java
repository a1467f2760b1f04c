package dev.strata.csi.controller.agents;

import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.agent.api.ProbeRequest;
import dev.strata.csi.agent.api.ProbeResponse;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall.SimpleForwardingClientCall;
import io.grpc.ForwardingClientCallListener.SimpleForwardingClientCallListener;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The node agents the controller knows: each registered itself and renews its lease. A lease
 * three renewals old is expired: that node gets no new volumes until it renews, but calls for
 * its existing volumes still go to the address it last gave (if it is really gone, they fail
 * UNAVAILABLE and the sidecars retry). An agent silent for thirty renewals is forgotten: its node
 * was removed. Nothing is persisted: after a controller restart the agents' next renewals rebuild
 * the directory, and until two renewal intervals have passed an unknown node is UNAVAILABLE, not
 * NOT_FOUND, and ListVolumes waits, so nothing is mistaken for gone while agents come back.
 *
 * <p>Every call to an agent has a deadline (--agent-call-timeout, well inside the sidecars' 10 s).
 * A node whose agent lets one pass is marked ({@link Responsiveness}) and probed at once and at
 * each of its renewals; until it answers, calls that need it fail at once with UNAVAILABLE.
 */
public final class AgentDirectory implements AutoCloseable {

    /**
     * A live agent as it last described itself: {@code pool} is its image pool, {@code pools} every
     * pool it has.
     */
    public record Agent(String nodeId, String address, PoolStatus pool, Map<String, String> topology, Instant renewed,
            List<PoolStatus> pools) {

        /**
         * The node's pool of that kind (unspecified: the image pool); empty when it has none. The
         * agent lists every pool it takes volumes in, which on an LVM-only node (node-server's
         * --image-pool=false) leaves the image pool out; a registration without that list (the
         * scale benchmark's simulated nodes and the tests' stand-in agents send only {@code pool}) has
         * the image pool alone.
         */
        public Optional<PoolStatus> pool(PoolKind kind) {
            boolean image = kind == PoolKind.POOL_KIND_UNSPECIFIED || kind == PoolKind.POOL_IMAGE;
            if (image && pools.isEmpty()) {
                return Optional.of(pool);
            }
            return pools.stream().filter(status -> status.getKind() == kind
                    || image && status.getKind() == PoolKind.POOL_KIND_UNSPECIFIED).findFirst();
        }
    }

    /** {@code instance}: the agent process's own id; a new one at the same address is a restarted agent. */
    private record Entry(Agent agent, String instance, ManagedChannel channel) {}

    private final Map<String, Entry> agents = new ConcurrentHashMap<>();
    /**
     * The same agents, most available capacity first (ties by node id): a volume with no topology
     * goes to the first live one with room, found without sorting every agent at each create.
     * Changed with {@link #agents}, inside its compute for the node. An element stands for its
     * node's place in the order only: what the node is now is read from {@link #agents}.
     */
    private static final Comparator<Agent> MOST_AVAILABLE_FIRST =
            Comparator.comparingLong((Agent agent) -> agent.pool().getAvailableBytes()).reversed().thenComparing(Agent::nodeId);
    private final ConcurrentSkipListSet<Agent> byAvailable = new ConcurrentSkipListSet<>(MOST_AVAILABLE_FIRST);
    private final Duration renewEvery;
    private final Duration callTimeout;
    private final AgentSecurity security;
    private final Clock clock;
    private final Log log;
    private final AgentMetrics metrics;
    private final Instant settledAt;
    private final Responsiveness responsiveness;
    private final VolumeIndex index = new VolumeIndex();
    /** Nodes whose agent process has registered but not yet reported everything. */
    private final Set<String> unreported = ConcurrentHashMap.newKeySet();
    /** Told the node id of each agent process once the index holds all it reported (a node new, back, or restarted), on a thread of its own. */
    private final List<java.util.function.Consumer<String>> reportedListeners = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final Instant startedAt;

    /**
     * @param settleTime how long after start an unknown node may still be an agent on its way back
     *                   (two renewal intervals cover every agent that is up)
     */
    public AgentDirectory(Duration renewEvery, Duration settleTime, Duration callTimeout, AgentSecurity security,
            Clock clock, Log log, AgentMetrics metrics) {
        this.metrics = metrics;
        this.renewEvery = renewEvery;
        this.callTimeout = callTimeout;
        this.security = security;
        this.clock = clock;
        this.log = log;
        this.settledAt = clock.instant().plus(settleTime);
        this.startedAt = clock.instant();
        this.responsiveness = new Responsiveness(callTimeout, clock);
    }

    /** Whether agents may still be on their way back after this controller started. */
    public boolean settling() {
        return clock.instant().isBefore(settledAt);
    }

    public Duration renewEvery() {
        return renewEvery;
    }

    /** Registers or renews, and applies the report; true when the agent must send its whole inventory. */
    boolean register(RegisterRequest request) {
        // The report first: from the moment the node is in the directory, its names are in the index or it is unreported.
        boolean sendInventory = index.report(request);
        boolean complete = index.complete(request.getNodeId());
        boolean nowReported = false;
        if (complete) {
            nowReported = unreported.remove(request.getNodeId());
        } else {
            unreported.add(request.getNodeId());
        }
        Agent agent = new Agent(request.getNodeId(), request.getAddress(), request.getPool(),
                Map.copyOf(request.getTopologyMap()), clock.instant(), List.copyOf(request.getPoolsList()));
        boolean[] newAgent = {false};
        agents.compute(request.getNodeId(), (nodeId, previous) -> {
            // The new place first, then the old one out: a reader meanwhile sees the node at least
            // once (a renewal must not hide a node from a create). A place equal to the old one stays.
            byAvailable.add(agent);
            if (previous != null && MOST_AVAILABLE_FIRST.compare(previous.agent(), agent) != 0) {
                byAvailable.remove(previous.agent());
            }
            if (previous != null && previous.agent().address().equals(agent.address())
                    && previous.instance().equals(request.getInstance())) {
                return new Entry(agent, previous.instance(), previous.channel());
            }
            newAgent[0] = true;
            if (previous != null) {
                if (!expired(previous.agent()) && !previous.agent().address().equals(agent.address())) {
                    // Two node-servers with one --node-id would take the node from each other at every renewal.
                    log.warn("node registered from a new address while its lease from the old one is live",
                            "node", nodeId, "old_address", previous.agent().address(), "new_address", agent.address());
                }
                previous.channel().shutdown();
            }
            // A restarted agent at the same address too: the old channel may hold a connection to the
            // process that died, and its first call would fail.
            return new Entry(agent, request.getInstance(), security.channel(agent.address()));
        });
        if (newAgent[0]) { // logged once the directory holds it: calls for the node go there from now on
            responsiveness.forget(agent.nodeId()); // a new agent process: the old one's silence says nothing of it
            log.info("agent registered", "node", agent.nodeId(), "address", agent.address(), "instance", request.getInstance(),
                    "available_bytes", agent.pool().getAvailableBytes());
        }
        if (complete && (newAgent[0] || nowReported)) {
            reportedListeners.forEach(listener -> Thread.ofVirtual().start(() -> listener.accept(agent.nodeId())));
        }
        probe(agent.nodeId()); // a stopped agent that was continued renews: it takes calls again once it answers
        return sendInventory;
    }

    /** Where every volume and snapshot is, as the agents reported it and this controller's calls made it. */
    public VolumeIndex index() {
        return index;
    }

    /**
     * Returns when the index holds everything a name could be found on: UNAVAILABLE, naming {@code what},
     * while this controller has just started (agents may be on their way back) or a node with a
     * live lease has not reported everything yet. A node whose lease ran out is not waited for.
     */
    public void requireReported(String what) {
        if (settling()) {
            throw CsiException.unavailable("controller-server started recently; waiting for node agents to report their volumes "
                    + "before it can tell " + what);
        }
        for (String nodeId : unreported) {
            if (live(nodeId).isPresent()) {
                throw CsiException.unavailable("the agent of " + nodeId + " has not reported its volumes and snapshots yet; "
                        + "waiting for it before it can tell " + what);
            }
        }
    }

    /**
     * Returns when the index holds everything of {@code nodeId}, the one node a name with that node
     * in its id could be on; otherwise UNAVAILABLE, as {@link #requireReported(String)}, while that
     * node may still report (this controller just started, or its live agent has not sent everything).
     */
    public void requireReported(String nodeId, String what) {
        if (index.complete(nodeId)) {
            return;
        }
        if (settling()) {
            throw CsiException.unavailable("controller-server started recently; waiting for the agent of " + nodeId
                    + " to report its volumes before it can tell " + what);
        }
        if (unreported.contains(nodeId) && live(nodeId).isPresent()) {
            throw CsiException.unavailable("the agent of " + nodeId + " has not reported its volumes and snapshots yet; "
                    + "waiting for it before it can tell " + what);
        }
    }

    /** Whether calls to the agent of {@code nodeId} are let through: it has not let one pass its deadline since it last answered. */
    public boolean answering(String nodeId) {
        return !responsiveness.silent(nodeId);
    }

    /** The nodes whose agents let a call pass its deadline and have not answered since. */
    public Set<String> notAnswering() {
        return responsiveness.silent();
    }

    /** Asks a marked agent whether it answers again; nothing when it is not marked or a probe is in flight. */
    private void probe(String nodeId) {
        Entry entry = agents.get(nodeId);
        if (entry == null || !responsiveness.startProbe(nodeId)) {
            return;
        }
        // Forked: the call that starts a probe (a renewal, a CSI call) ends long before it, and would cancel it.
        io.grpc.Context.current().fork().run(() -> NodeAgentGrpc.newStub(entry.channel())
                .withCallCredentials(security.credentials())
                .withDeadlineAfter(callTimeout.toMillis(), TimeUnit.MILLISECONDS)
                .probe(ProbeRequest.getDefaultInstance(), new StreamObserver<>() {
                    @Override
                    public void onNext(ProbeResponse value) {}

                    @Override
                    public void onError(Throwable t) {
                        responsiveness.probeEnded(nodeId, false);
                        log.info("node agent still does not answer", "node", nodeId, "probe", io.grpc.Status.fromThrowable(t).toString());
                    }

                    @Override
                    public void onCompleted() {
                        responsiveness.probeEnded(nodeId, true);
                        log.info("node agent answers again", "node", nodeId);
                    }
                }));
    }

    /** The live agent of {@code nodeId}: registered, lease current. */
    public Optional<Agent> live(String nodeId) {
        Entry entry = agents.get(nodeId);
        return entry == null || expired(entry.agent()) ? Optional.empty() : Optional.of(entry.agent());
    }

    /**
     * The pool of {@code nodeId} as its agent last reported it, for GetCapacity; empty for a node
     * with no agent (none ever registered, or silent so long it was forgotten). UNAVAILABLE while
     * the answer would be a guess: the agent's lease has expired (it is restarting, as in a
     * rollout of the node DaemonSet), or none has registered yet since this controller started.
     * A capacity of 0 there would make every WaitForFirstConsumer pod bound for the node
     * unschedulable, where an error makes external-provisioner keep the capacity it published.
     */
    public Optional<PoolStatus> poolOf(String nodeId) {
        return agentOf(nodeId).map(Agent::pool);
    }

    /** The node's pool of {@code kind}, as {@link #poolOf(String)}; empty too when the node has no such pool. */
    public Optional<PoolStatus> poolOf(String nodeId, PoolKind kind) {
        return agentOf(nodeId).flatMap(agent -> agent.pool(kind));
    }

    private Optional<Agent> agentOf(String nodeId) {
        forgetSilentAgents();
        Entry entry = agents.get(nodeId);
        if (entry == null) {
            if (settling()) {
                throw CsiException.unavailable("controller-server started recently; waiting for the agent of " + nodeId + " to register");
            }
            return Optional.empty();
        }
        if (expired(entry.agent())) {
            throw CsiException.unavailable("the agent of " + nodeId + " has not renewed its lease since " + entry.agent().renewed()
                    + "; is node-server restarting there?");
        }
        return Optional.of(entry.agent());
    }

    /**
     * Returns when an agent has registered for {@code nodeId} and is not forgotten; otherwise
     * UNAVAILABLE while the directory is settling, else NOT_FOUND with {@code notFound}.
     */
    public void requireKnown(String nodeId, String notFound) {
        forgetSilentAgents();
        if (!agents.containsKey(nodeId)) {
            throw settling()
                    ? CsiException.unavailable("controller-server started recently; waiting for the agent of " + nodeId + " to renew")
                    : CsiException.notFound(notFound);
        }
    }

    /** Calls {@code listener} with the node id of every agent process that registers anew, once all it reported is in the index. */
    public void onReported(java.util.function.Consumer<String> listener) {
        reportedListeners.add(listener);
    }

    /**
     * Whether {@code nodeId} is removed from the cluster as far as this controller can tell: no
     * agent of it is registered, and this controller has run as long as it takes to forget a
     * silent one (thirty renewals), so one that was registered before it started would be back.
     */
    public boolean removed(String nodeId) {
        forgetSilentAgents();
        return !agents.containsKey(nodeId) && clock.instant().isAfter(startedAt.plus(renewEvery.multipliedBy(30)));
    }

    /** Every agent that registered and is not forgotten, live or not. */
    public List<Agent> registered() {
        forgetSilentAgents();
        return agents.values().stream().map(Entry::agent).toList();
    }

    private void forgetSilentAgents() {
        Instant forgetBefore = clock.instant().minus(renewEvery.multipliedBy(30));
        for (var silent : agents.entrySet()) {
            if (!silent.getValue().agent().renewed().isBefore(forgetBefore)) {
                continue;
            }
            String nodeId = silent.getKey();
            // Atomic with a renewal of the node (register's compute): a node that renewed meanwhile stays.
            agents.computeIfPresent(nodeId, (ignored, entry) -> {
                if (!entry.agent().renewed().isBefore(forgetBefore)) {
                    return entry;
                }
                byAvailable.remove(entry.agent());
                responsiveness.forget(nodeId);
                index.forget(nodeId);
                unreported.remove(nodeId);
                log.warn("forgetting agent silent for thirty renewals; its node is treated as removed", "node", nodeId);
                entry.channel().shutdown();
                return null;
            });
        }
    }

    /** Live agents, most available capacity first. */
    public List<Agent> live() {
        return emptiestFirst().toList();
    }

    /** Live agents, most available capacity first, as far as the caller reads: no sort, each costs its own step. */
    public Stream<Agent> emptiestFirst() {
        return byAvailable.stream()
                .map(place -> agents.get(place.nodeId()))
                .filter(entry -> entry != null)
                .map(Entry::agent)
                .distinct() // during a renewal a node may hold its old place and its new one
                .filter(agent -> !expired(agent));
    }

    /**
     * A stub for calls to the agent of {@code nodeId}, each with the call deadline; UNAVAILABLE when
     * it never registered or does not answer. A call that passes its deadline fails UNAVAILABLE,
     * naming the node, and marks it.
     */
    public NodeAgentGrpc.NodeAgentBlockingStub stub(String nodeId) {
        return stub(nodeId, Duration.ZERO);
    }

    /**
     * {@link #stub(String)} for a call that may wait {@code longer} than the call deadline for what
     * the node cannot hurry: a snapshot's freeze (FIFREEZE flushes what the volume's writers wrote)
     * and its copy, which a busy disk stretches past a short deadline without anything being wrong
     * with the agent. The CSI caller's own deadline, when earlier, still ends it (gRPC's context).
     */
    public NodeAgentGrpc.NodeAgentBlockingStub stub(String nodeId, Duration longer) {
        Duration deadline = callTimeout.plus(longer);
        return NodeAgentGrpc.newBlockingStub(channel(nodeId))
                .withInterceptors(metrics.forNode(nodeId), deadlines(nodeId, deadline))
                .withCallCredentials(security.credentials())
                .withDeadlineAfter(deadline.toMillis(), TimeUnit.MILLISECONDS);
    }

    /**
     * A stub for the streams of a volume's content to and from the agent of {@code nodeId}: no
     * deadline, since a volume takes as long as it takes; the caller watches their progress.
     */
    public NodeAgentGrpc.NodeAgentStub streamStub(String nodeId) {
        return NodeAgentGrpc.newStub(channel(nodeId))
                .withInterceptors(metrics.forNode(nodeId))
                .withCallCredentials(security.credentials());
    }

    private ManagedChannel channel(String nodeId) {
        Entry entry = agents.get(nodeId);
        if (entry == null) {
            throw CsiException.unavailable("the node agent of " + nodeId + " is not registered; is node-server running there?");
        }
        responsiveness.requireAnswering(nodeId);
        return entry.channel();
    }

    /** Marks the node of a call that passed its deadline and probes it; the caller gets UNAVAILABLE naming the node. */
    private ClientInterceptor deadlines(String nodeId, Duration deadline) {
        return new ClientInterceptor() {
            @Override
            public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
                    MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
                return new SimpleForwardingClientCall<>(next.newCall(method, options)) {
                    @Override
                    public void start(Listener<RespT> listener, Metadata headers) {
                        super.start(new SimpleForwardingClientCallListener<>(listener) {
                            @Override
                            public void onClose(Status status, Metadata trailers) {
                                if (status.getCode() == Status.Code.DEADLINE_EXCEEDED) {
                                    status = Status.UNAVAILABLE.withDescription(responsiveness.timedOut(nodeId, deadline));
                                    log.warn("node agent did not answer within the call deadline; calls that need its node fail "
                                            + "until it answers a probe", "node", nodeId, "method", method.getBareMethodName());
                                    probe(nodeId);
                                }
                                super.onClose(status, trailers);
                            }
                        }, headers);
                    }
                };
            }
        };
    }

    private boolean expired(Agent agent) {
        return agent.renewed().plus(renewEvery.multipliedBy(3)).isBefore(clock.instant());
    }

    @Override
    public void close() {
        agents.values().forEach(entry -> entry.channel().shutdownNow());
    }
}
