package dev.strata.csi.controller.local;

import dev.strata.csi.backend.local.LocalTopology;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.server.DriverProgram;

/**
 * The local backend of controller-server: placement over the node agents that registered with
 * it, and the relay of copies between nodes. It has no flags of its own; the agents' are
 * controller-server's, since the Controller service checks a node's agent for every backend.
 * ControllerServer names it in one line.
 */
public final class LocalControllerWiring {

    private LocalControllerWiring() {}

    public static LocalController fromFlags(DriverProgram.Context context, AgentDirectory agents) {
        return new LocalController(agents, LocalTopology.forDriver(context.plugin().name()),
                new ContentRelay(new RelayMetrics(context.metrics()), context.log()));
    }
}
