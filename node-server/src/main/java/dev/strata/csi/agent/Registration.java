package dev.strata.csi.agent;

import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.RegisterResponse;
import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.backend.local.ImagePool;
import dev.strata.csi.log.Log;
import dev.strata.csi.server.Component;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;

/**
 * Keeps this node known to controller-server: registers at start and renews at the interval the
 * controller asks for, with the pool's current capacity. A controller that is down or restarting
 * is retried at the same pace, so both sides re-converge without a person.
 */
public final class Registration implements Component {

    private static final Duration FIRST_INTERVAL = Duration.ofSeconds(10);

    private final String controllerAddress;
    private final String nodeId;
    private final String advertisedHost;
    private final IntSupplier agentPort;
    private final Map<String, String> topology;
    private final ImagePool pool;
    private final AgentSecurity security;
    private final Log log;
    private ManagedChannel channel;
    private Thread loop;
    private volatile boolean registered;

    public Registration(String controllerAddress, String nodeId, String advertisedHost, IntSupplier agentPort,
            Map<String, String> topology, ImagePool pool, AgentSecurity security, Log log) {
        this.controllerAddress = controllerAddress;
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
        channel = security.channel(controllerAddress);
        loop = Thread.ofVirtual().name("registration").start(this::run);
    }

    private void run() {
        Duration interval = FIRST_INTERVAL;
        while (!Thread.currentThread().isInterrupted()) {
            interval = renew().orElse(interval);
            try {
                Thread.sleep(interval);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /** One registration; the interval the controller asked for, or empty when it could not be reached. */
    private java.util.Optional<Duration> renew() {
        try {
            RegisterResponse reply = AgentRegistryGrpc.newBlockingStub(channel)
                    .withCallCredentials(security.token().credentials())
                    .withDeadlineAfter(10, TimeUnit.SECONDS)
                    .register(RegisterRequest.newBuilder()
                            .setNodeId(nodeId)
                            .setAddress(advertisedHost + ":" + agentPort.getAsInt())
                            .setPool(pool.status())
                            .putAllTopology(topology)
                            .build());
            if (!registered) {
                log.info("registered with controller", "controller", controllerAddress, "node", nodeId);
                registered = true;
            }
            return java.util.Optional.of(Duration.ofSeconds(Math.max(1, reply.getRenewSeconds())));
        } catch (StatusRuntimeException e) {
            log.warn("cannot register with controller; retrying", "controller", controllerAddress,
                    "code", e.getStatus().getCode(), "error", e.getStatus().getDescription());
            registered = false;
            return java.util.Optional.empty();
        } catch (java.io.IOException e) {
            log.warn("cannot read pool status; retrying", "error", e.getMessage());
            return java.util.Optional.empty();
        }
    }

    @Override
    public void stop(Duration grace) {
        if (loop != null) {
            loop.interrupt();
        }
        if (channel != null) {
            channel.shutdownNow();
        }
    }
}
