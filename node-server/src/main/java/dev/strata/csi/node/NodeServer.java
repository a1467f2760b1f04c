package dev.strata.csi.node;

import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.identity.IdentityService;
import dev.strata.csi.server.DriverProgram;
import java.nio.charset.StandardCharsets;
import java.util.List;

/** The node-server program: CSI Identity and Node services, run as a DaemonSet on every node. */
public final class NodeServer {

    static final Flag NODE_ID = new Flag("node-id", "NODE_ID", null,
            "this node's id as Kubernetes knows it (usually spec.nodeName via the downward API)");

    private NodeServer() {}

    public static void main(String[] args) {
        DriverProgram program = new DriverProgram("node-server",
                "Serves the CSI Node service beside node-driver-registrar on every node.",
                List.of(NODE_ID),
                context -> List.of(
                        new IdentityService(context.plugin(), List.of(), () -> true),
                        new NodeService(nodeId(context.flags().get(NODE_ID)))));
        System.exit(program.run(args, System.getenv(), System.out, System.err));
    }

    /** The CSI spec caps a node id at 256 bytes; Kubernetes node names are DNS names and fit. */
    static String nodeId(String value) throws UsageException {
        if (value.getBytes(StandardCharsets.UTF_8).length > 256) {
            throw new UsageException("node id is longer than the 256 bytes CSI allows");
        }
        return value;
    }
}
