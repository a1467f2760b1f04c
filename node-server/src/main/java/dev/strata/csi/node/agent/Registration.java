package dev.strata.csi.node.agent;

import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.RegisterResponse;
import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.server.Component;
import dev.strata.csi.server.Periodic;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;

/**
 * Keeps this node known to every controller-server replica: the sidecars of whichever replica
 * leads call their own pod's controller at once, so each must know every agent all the time. At
 * every renewal the controller addresses are resolved again; each address gets its own channel and
 * its own renewal loop, registering at start and renewing at the interval that controller asks
 * for, with the pool's current capacity. A controller that is down or slow is retried at the same
 * pace without holding up the others, and both sides re-converge without a person.
 *
 * <p>Each registration also reports the pool's volumes and snapshots ({@link Inventory}): all of
 * them the first time and whenever the controller asks, else what changed since the generation it
 * confirmed. A change is pushed at once, not at the next renewal, so every replica's index follows
 * the pool within a round trip.
 */
public final class Registration implements Component {

    private static final Duration FIRST_INTERVAL = Duration.ofSeconds(10);
    private static final Duration CALL_DEADLINE = Duration.ofSeconds(10);

    private final ControllerAddresses controllers;
    private final String nodeId;
    private final String advertisedHost;
    private final IntSupplier agentPort;
    private final Map<String, String> topology;
    private final NodePools pools;
    private final Inventory inventory;
    private final AgentSecurity security;
    private final Log log;
    private final Map<String, Renewal> renewals = new ConcurrentHashMap<>();
    /** This process's registrations, told apart from an earlier process's at the same address. */
    private final String instance = HexFormat.of().toHexDigits(new SecureRandom().nextLong());
    /** The interval the controllers last asked for; addresses are resolved again at this pace. */
    private volatile Duration interval = FIRST_INTERVAL;
    /** The addresses resolved again at that interval; the first time at once, on its own thread. */
    private final Periodic resolving = new Periodic("registration", () -> interval, this::followResolved, false);

    public Registration(ControllerAddresses controllers, String nodeId, String advertisedHost, IntSupplier agentPort,
            Map<String, String> topology, NodePools pools, Inventory inventory, AgentSecurity security, Log log) {
        this.inventory = inventory;
        inventory.onChange(() -> renewals.values().forEach(Renewal::changed));
        this.controllers = controllers;
        this.nodeId = nodeId;
        this.advertisedHost = advertisedHost;
        this.agentPort = agentPort;
        this.topology = topology;
        this.pools = pools;
        this.security = security;
        this.log = log;
    }

    @Override
    public void start() {
        resolving.start();
    }

    private void followResolved() {
        follow(controllers.resolve());
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
        private final java.util.concurrent.Semaphore changes = new java.util.concurrent.Semaphore(0);
        private boolean registered;
        /** The inventory generation this controller confirmed; -1: it has none, or asked for everything. */
        private long confirmed = -1;

        Renewal(String target) {
            this.target = target;
            this.channel = security.channel(target);
            this.thread = Thread.ofPlatform().daemon().name("registration-" + target).start(this::run);
        }

        private void run() {
            while (!Thread.currentThread().isInterrupted()) {
                Optional<Duration> renewed = renew();
                try {
                    if (renewed.isPresent() && confirmed < inventory.generation()) {
                        continue; // behind, or asked for everything: at once
                    }
                    // A change wakes a registered renewal early; one that failed keeps its pace.
                    changes.drainPermits();
                    if (renewed.isPresent()) {
                        changes.tryAcquire(renewed.get().toMillis(), TimeUnit.MILLISECONDS);
                    } else {
                        Thread.sleep(interval);
                    }
                } catch (InterruptedException e) {
                    return;
                }
            }
        }

        void changed() {
            changes.release();
        }

        /** One registration; the interval the controller asked for, or empty when it could not be reached. */
        private Optional<Duration> renew() {
            if (!registered) {
                // A controller restarted at the same address is tried now, not after gRPC's reconnect backoff (up to 2 min).
                channel.resetConnectBackoff();
            }
            try {
                RegisterRequest.Builder request = RegisterRequest.newBuilder()
                        .setNodeId(nodeId)
                        .setAddress(advertisedHost + ":" + agentPort.getAsInt())
                        .setPool(pools.imageStatus())
                        .addAllPools(pools.statuses())
                        .putAllTopology(topology)
                        .setInstance(instance);
                long reported = inventory.report(confirmed, request);
                RegisterResponse reply = AgentRegistryGrpc.newBlockingStub(channel)
                        .withCallCredentials(security.credentials())
                        .withDeadlineAfter(CALL_DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                        .register(request.build());
                confirmed = reply.getSendInventory() ? -1 : reported;
                if (!registered) {
                    log.info("registered with controller", "controller", target, "node", nodeId, "instance", instance);
                    registered = true;
                }
                Duration asked = Duration.ofSeconds(Math.max(1, reply.getRenewSeconds()));
                boolean shorter = asked.compareTo(interval) < 0;
                interval = asked;
                if (shorter) {
                    resolving.reschedule();
                }
                return Optional.of(asked);
            } catch (StatusRuntimeException e) {
                if (Thread.currentThread().isInterrupted()) {
                    return Optional.empty(); // stopped: the address went away or the server shuts down
                }
                log.warn("cannot register with controller; retrying", "controller", target,
                        "code", e.getStatus().getCode(), "error", e.getStatus().getDescription());
                registered = false;
                confirmed = -1; // a controller restarted meanwhile has nothing: everything at the next registration
                return Optional.empty();
            } catch (IOException | DeviceException e) {
                log.warn("cannot read the pool's status or inventory; retrying", "error", e.getMessage());
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
        resolving.stop(grace);
        renewals.values().forEach(Renewal::stop);
        renewals.clear();
    }
}
