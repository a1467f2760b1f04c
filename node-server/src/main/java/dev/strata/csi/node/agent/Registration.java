package dev.strata.csi.node.agent;

import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.RegisterResponse;
import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.ImagePool;
import dev.strata.csi.server.Component;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntSupplier;

/**
 * Keeps this node known to every controller-server replica: the sidecars of whichever replica
 * leads call their own pod's controller at once, so each must know every agent all the time. At
 * every renewal the controller addresses are resolved again; each address gets its own channel and
 * its own renewal loop, registering at start and renewing at the interval that controller asks
 * for, with the pool's current capacity. A controller that is down or slow is retried at the same
 * pace without holding up the others, and both sides re-converge without a person.
 */
public final class Registration implements Component {

    private static final Duration FIRST_INTERVAL = Duration.ofSeconds(10);
    private static final Duration CALL_DEADLINE = Duration.ofSeconds(10);

    private final ControllerAddresses controllers;
    private final String nodeId;
    private final String advertisedHost;
    private final IntSupplier agentPort;
    private final Map<String, String> topology;
    private final ImagePool pool;
    private final AgentSecurity security;
    private final Log log;
    private final Map<String, Renewal> renewals = new ConcurrentHashMap<>();
    /** This process's registrations, told apart from an earlier process's at the same address. */
    private final String instance = HexFormat.of().toHexDigits(new SecureRandom().nextLong());
    /** The interval the controllers last asked for; addresses are resolved again at this pace. */
    private volatile Duration interval = FIRST_INTERVAL;
    private Thread loop;

    public Registration(ControllerAddresses controllers, String nodeId, String advertisedHost, IntSupplier agentPort,
            Map<String, String> topology, ImagePool pool, AgentSecurity security, Log log) {
        this.controllers = controllers;
        this.nodeId = nodeId;
        this.advertisedHost = advertisedHost;
        this.agentPort = agentPort;
        this.topology = topology;
        this.pool = pool;
        this.security = security;
        this.log = log;
    }

    @Override
    public void start() {
        loop = Thread.ofPlatform().daemon().name("registration").unstarted(this::run);
        loop.start();
    }

    private void run() {
        while (!Thread.currentThread().isInterrupted()) {
            long resolvedAt = System.nanoTime();
            follow(controllers.resolve());
            long remaining;
            while ((remaining = resolvedAt + interval.toNanos() - System.nanoTime()) > 0) {
                LockSupport.parkNanos(this, remaining); // woken early when a controller asks for a shorter interval
                if (Thread.currentThread().isInterrupted()) {
                    return;
                }
            }
        }
    }

    /** Starts a renewal loop for each address that appeared and stops those of addresses that went away. */
    private void follow(Set<String> targets) {
        for (String target : Set.copyOf(renewals.keySet())) {
            if (!targets.contains(target)) {
                renewals.remove(target).stop();
                log.info("controller address went away; no longer registering there", "controller", target, "node", nodeId);
            }
        }
        for (String target : targets) {
            if (!renewals.containsKey(target)) {
                log.info("controller address appeared; registering there", "controller", target, "node", nodeId);
                renewals.put(target, new Renewal(target));
            }
        }
    }

    /** The registration with one controller address: its channel and its loop. */
    private final class Renewal {
        private final String target;
        private final ManagedChannel channel;
        private final Thread thread;
        private boolean registered;

        Renewal(String target) {
            this.target = target;
            this.channel = security.channel(target);
            this.thread = Thread.ofPlatform().daemon().name("registration-" + target).start(this::run);
        }

        private void run() {
            while (!Thread.currentThread().isInterrupted()) {
                Duration next = renew().orElse(interval);
                try {
                    Thread.sleep(next);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        /** One registration; the interval the controller asked for, or empty when it could not be reached. */
        private Optional<Duration> renew() {
            if (!registered) {
                // A controller restarted at the same address is tried now, not after gRPC's reconnect backoff (up to 2 min).
                channel.resetConnectBackoff();
            }
            try {
                RegisterResponse reply = AgentRegistryGrpc.newBlockingStub(channel)
                        .withCallCredentials(security.credentials())
                        .withDeadlineAfter(CALL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                        .register(RegisterRequest.newBuilder()
                                .setNodeId(nodeId)
                                .setAddress(advertisedHost + ":" + agentPort.getAsInt())
                                .setPool(pool.status())
                                .putAllTopology(topology)
                                .setInstance(instance)
                                .build());
                if (!registered) {
                    log.info("registered with controller", "controller", target, "node", nodeId, "instance", instance);
                    registered = true;
                }
                Duration asked = Duration.ofSeconds(Math.max(1, reply.getRenewSeconds()));
                boolean shorter = asked.compareTo(interval) < 0;
                interval = asked;
                if (shorter) {
                    LockSupport.unpark(loop);
                }
                return Optional.of(asked);
            } catch (StatusRuntimeException e) {
                if (Thread.currentThread().isInterrupted()) {
                    return Optional.empty(); // stopped: the address went away or the server shuts down
                }
                log.warn("cannot register with controller; retrying", "controller", target,
                        "code", e.getStatus().getCode(), "error", e.getStatus().getDescription());
                registered = false;
                return Optional.empty();
            } catch (java.io.IOException e) {
                log.warn("cannot read pool status; retrying", "error", e.getMessage());
                return Optional.empty();
            }
        }

        void stop() {
            thread.interrupt();
            channel.shutdownNow();
        }
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
        renewals.values().forEach(Renewal::stop);
        renewals.clear();
    }
}
