package dev.strata.csi.node;

import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.backend.local.LocalTopology;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.identity.IdentityService;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.metrics.SystemSteps;
import dev.strata.csi.node.backend.NodeBackends;
import dev.strata.csi.node.local.LocalNodeWiring;
import dev.strata.csi.node.mount.MeteredMounter;
import dev.strata.csi.node.mount.MountHelpers;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.node.mount.SystemMounter;
import dev.strata.csi.node.nfs.NfsNodeWiring;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.server.DriverProgram;
import dev.strata.csi.system.Command;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;

/**
 * The node-server program, run as a DaemonSet on every node: the CSI Identity and Node services
 * on the kubelet socket, and the node agent that owns this node's pools and serves controller-server.
 */
public final class NodeServer {

    static final Flag NODE_ID = Flag.of("node-id", null,
            "this node's id as Kubernetes knows it (usually spec.nodeName via the downward API)");
    static final Flag KUBELET_DIR = Flag.of("kubelet-dir", "/var/lib/kubelet",
            "kubelet's root directory; staging and target paths outside it are refused");
    static final Flag MAX_VOLUMES = Flag.of("max-volumes", "0",
            "most volumes the scheduler may place on this node (0: no limit)");


    private NodeServer() {}

    private static List<Flag> flags() {
        List<Flag> flags = new java.util.ArrayList<>(List.of(NODE_ID, KUBELET_DIR, MAX_VOLUMES));
        flags.addAll(LocalNodeWiring.flags());
        flags.addAll(NfsNodeWiring.flags());
        flags.addAll(AgentSecurity.flags());
        return flags;
    }

    public static void main(String[] args) {
        // Controller addresses are resolved again at every renewal: the JVM's own cache of
        // 30 s would hide a controller pod that came or went.
        java.security.Security.setProperty("networkaddress.cache.ttl", "0");
        java.security.Security.setProperty("networkaddress.cache.negative.ttl", "0");
        DriverProgram program = new DriverProgram("node-server",
                "Serves the CSI Node service beside node-driver-registrar and runs this node's agent.",
                flags(),
                context -> {
                    var flags = context.flags();
                    String nodeId = nodeId(flags.get(NODE_ID));
                    LocalTopology topology = LocalTopology.forDriver(context.plugin().name());
                    Path kubeletDir = kubeletDir(flags.get(KUBELET_DIR));
                    Command commands = new Command();
                    Kernel kernel = new Kernel();
                    SystemSteps steps = new SystemSteps(context.metrics());
                    Mounter mounter = new MeteredMounter(new SystemMounter(kernel, commands, MountHelpers.system()), steps);
                    VolumeLocks locks = new VolumeLocks();
                    LocalNodeWiring local = LocalNodeWiring.fromFlags(context,
                            new LocalNodeWiring.Node(nodeId, topology, kubeletDir, kernel, commands, mounter, steps, locks));
                    // The backends, one line each; NodeBackends chooses among them by volume id and context.
                    NodeBackends backends = new NodeBackends(List.of(
                            local.backend(),
                            NfsNodeWiring.fromFlags(context, commands, mounter)));
                    return new DriverProgram.Plan(
                            List.of(new IdentityService(context.plugin(), IdentityService.DRIVER_CAPABILITIES, local.ownership()::ready),
                                    new NodeService(nodeId, topology, flags.intValue(MAX_VOLUMES, 0, 1 << 20), backends, locks, kubeletDir,
                                            local.poolDir())),
                            local.components(), local.ownership()::ready);
                });
        System.exit(program.run(args, System.getenv(), System.out, System.err));
    }

    /** Volume ids carry the node id, so it must be a node name: this also keeps it within CSI's 256 bytes. */
    static String nodeId(String value) throws UsageException {
        if (!LocalVolumeId.nodeIdAllowed(value)) {
            throw new UsageException("node id must be a Kubernetes node name: at most 253 letters, digits, '.', '-' and '_'");
        }
        return value;
    }

    /** kubelet's directory, resolved: request paths are checked against it once theirs are resolved too. */
    private static Path kubeletDir(String value) throws UsageException {
        Path dir = Path.of(value);
        if (!dir.isAbsolute()) {
            throw new UsageException("flag --kubelet-dir must be an absolute path, got '" + value + "'");
        }
        try {
            return dir.toRealPath();
        } catch (IOException e) {
            throw new UsageException("flag --kubelet-dir: " + value + " is not a directory here (" + e.getMessage()
                    + "); mount kubelet's directory into the container");
        }
    }
}
