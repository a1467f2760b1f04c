package dev.strata.csi.controller;

import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.controller.agents.AgentMetrics;
import dev.strata.csi.controller.agents.AgentRegistryService;
import dev.strata.csi.controller.backend.ControllerBackends;
import dev.strata.csi.controller.local.GroupSnapshotMetrics;
import dev.strata.csi.controller.local.GroupSnapshots;
import dev.strata.csi.controller.local.LocalControllerWiring;
import dev.strata.csi.controller.nfs.NfsControllerWiring;
import dev.strata.csi.flags.Flag;
import dev.strata.csi.identity.IdentityService;
import dev.strata.csi.server.DriverProgram;
import dev.strata.csi.server.TcpComponent;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** The controller-server program: CSI Identity, Controller, GroupController and SnapshotMetadata services, run as a Deployment. */
public final class ControllerServer {

    static final Flag REGISTRY_ADDRESS = Flag.of("agent-registry-address", "0.0.0.0:9869",
            "host:port where node agents register (TCP; every call must carry the agent token)");
    static final Flag RENEW = Flag.of("agent-renew-interval", "10s",
            "how often agents renew their registration; an agent silent for three intervals is treated as gone");
    static final Flag SETTLE = Flag.of("agent-settle-time", "20s",
            "after a start, how long an unknown node counts as an agent not yet back (UNAVAILABLE) rather than absent "
                    + "(NOT_FOUND); at least two renewal intervals");
    static final Flag AGENT_TIMEOUT = Flag.of("agent-call-timeout", "5s",
            "deadline for one call to a node agent, well inside the sidecars' timeouts (10 s by default); an agent that "
                    + "lets one pass is probed, and calls that need its node fail UNAVAILABLE at once until it answers. "
                    + "A snapshot's call (a freeze and a copy) gets 30 s more; copies between nodes stream with no deadline and fail when idle for 2 min");
    static final Flag ALLOW_UNBOUND_NODE_IDENTITY = Flag.bool("allow-unbound-node-identity", false,
            "given (or =true): take the registration of a node whose identity token carries no node claim (Kubernetes before "
                    + "1.30), on the node's word. RISK: root on any one node can then register as any other node and take "
                    + "over its new volumes and restores; refused by default");

    private ControllerServer() {}

    private static List<Flag> flags() {
        List<Flag> flags = new ArrayList<>(List.of(REGISTRY_ADDRESS, RENEW, SETTLE, AGENT_TIMEOUT, ALLOW_UNBOUND_NODE_IDENTITY));
        flags.addAll(NfsControllerWiring.flags());
        flags.addAll(AgentSecurity.flags());
        return flags;
    }

    public static void main(String[] args) {
        DriverProgram program = new DriverProgram("controller-server",
                "Serves the CSI Controller service beside external-provisioner and external-attacher.",
                flags(),
                context -> {
                    var flags = context.flags();
                    AgentSecurity security = AgentSecurity.fromFlags(AgentSecurity.Side.CONTROLLER, flags, context.environment(), context.log());
                    Duration renew = flags.durationValue(RENEW);
                    AgentMetrics agentMetrics = new AgentMetrics(context.metrics());
                    AgentDirectory agents = new AgentDirectory(renew, flags.durationValue(SETTLE),
                            flags.durationValue(AGENT_TIMEOUT), security,
                            Clock.systemUTC(), context.log(), agentMetrics);
                    agentMetrics.watch(agents, Clock.systemUTC(), context.metrics());
                    TcpComponent registry = new TcpComponent(
                            TcpComponent.address(REGISTRY_ADDRESS.name(), flags.get(REGISTRY_ADDRESS)), security.serverTls(),
                            List.of(new AgentRegistryService(agents,
                                    flags.booleanValue(ALLOW_UNBOUND_NODE_IDENTITY), context.log())),
                            security.verifiers(context.log()), context.log());
                    // The backends, one line each; ControllerBackends chooses among them (the last takes
                    // any StorageClass parameters the others do not want).
                    ControllerBackends backends = new ControllerBackends(List.of(
                            NfsControllerWiring.fromFlags(context),
                            LocalControllerWiring.fromFlags(context, agents)));
                    return new DriverProgram.Plan(List.of(
                            new IdentityService(context.plugin(), IdentityService.CONTROLLER_CAPABILITIES, () -> true),
                            new ControllerService(agents, backends),
                            new GroupControllerService(backends, new GroupSnapshots(agents, flags.durationValue(AGENT_TIMEOUT),
                                    new GroupSnapshotMetrics(context.metrics()), Clock.systemUTC(), context.log())),
                            new SnapshotMetadataService(agents)),
                            List.of(registry));
                });
        System.exit(program.run(args, System.getenv(), System.out, System.err));
    }
}
