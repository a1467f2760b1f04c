package dev.strata.csi.node;

import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.backend.local.Topology;
import dev.strata.csi.backend.local.VolumeId;
import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.identity.IdentityService;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.metrics.SystemSteps;
import dev.strata.csi.node.agent.AbandonedCopies;
import dev.strata.csi.node.agent.ControllerAddresses;
import dev.strata.csi.node.agent.Inventory;
import dev.strata.csi.node.agent.NodeAgentService;
import dev.strata.csi.node.agent.PoolOwnership;
import dev.strata.csi.node.agent.Registration;
import dev.strata.csi.node.backend.NodeBackends;
import dev.strata.csi.node.cgroup.SystemPodCgroups;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.node.local.Filesystems;
import dev.strata.csi.node.local.ImageContent;
import dev.strata.csi.node.local.ImageFiles;
import dev.strata.csi.node.local.ImagePool;
import dev.strata.csi.node.local.LocalNodeBackend;
import dev.strata.csi.node.local.LoopDevices;
import dev.strata.csi.node.local.MeteredFilesystemFreezer;
import dev.strata.csi.node.local.MeteredFilesystems;
import dev.strata.csi.node.local.MeteredImageFiles;
import dev.strata.csi.node.local.MeteredLoopDevices;
import dev.strata.csi.node.local.PoolMetrics;
import dev.strata.csi.node.local.SystemEncryptedDevices;
import dev.strata.csi.node.local.SystemFilesystemFreezer;
import dev.strata.csi.node.local.SystemFilesystems;
import dev.strata.csi.node.local.SystemImageFiles;
import dev.strata.csi.node.local.SystemLoopDevices;
import dev.strata.csi.node.local.VolumeEncryption;
import dev.strata.csi.node.local.VolumeIoLimits;
import dev.strata.csi.node.mount.MeteredMounter;
import dev.strata.csi.node.mount.MountHelpers;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.node.mount.SystemFilesystemStats;
import dev.strata.csi.node.mount.SystemMounter;
import dev.strata.csi.node.nfs.NfsNodeWiring;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.server.DriverProgram;
import dev.strata.csi.server.Periodic;
import dev.strata.csi.server.TcpComponent;
import dev.strata.csi.system.Command;
import dev.strata.csi.system.Crashes;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.List;

/**
 * The node-server program, run as a DaemonSet on every node: the CSI Identity and Node services
 * on the kubelet socket, and the node agent that owns this node's pool and serves controller-server.
 */
public final class NodeServer {

    static final Flag NODE_ID = new Flag("node-id", "NODE_ID", null,
            "this node's id as Kubernetes knows it (usually spec.nodeName via the downward API)");
    static final Flag POOL_DIR = new Flag("pool-dir", "POOL_DIR", "/var/lib/strata/pool",
            "directory holding this node's volume images and their records");
    static final Flag CONTROLLER_ADDRESS = new Flag("controller-address", "CONTROLLER_ADDRESS", null,
            "host:port of controller-server's agent registry, or a comma-separated list; the agent registers with every "
                    + "address each name resolves to (a headless Service: every replica), resolved again at every renewal");
    static final Flag AGENT_ADDRESS = new Flag("agent-address", "AGENT_ADDRESS", "0.0.0.0:9870",
            "host:port the node agent listens on for controller-server (port 0 picks a free one)");
    static final Flag ADVERTISE_HOST = new Flag("agent-advertise-host", "NODE_IP", "127.0.0.1",
            "host or IP controller-server dials to reach this agent (usually status.hostIP via the downward API)");
    static final Flag KUBELET_DIR = new Flag("kubelet-dir", "KUBELET_DIR", "/var/lib/kubelet",
            "kubelet's root directory; staging and target paths outside it are refused");
    static final Flag MAX_VOLUMES = new Flag("max-volumes", "MAX_VOLUMES", "0",
            "most volumes the scheduler may place on this node (0: no limit)");

    static final Flag ABANDONED_COPY_EXPIRY = new Flag("abandoned-copy-expiry", "ABANDONED_COPY_EXPIRY", "1h",
            "a volume partly received from another node (restore or clone across nodes) that no step of its copy touched for "
                    + "this long is removed, its capacity freed: its PVC was deleted and nobody comes back for it. A copy in "
                    + "progress records a step at least every 64 MiB, and external-provisioner retries CreateVolume at least "
                    + "every 5 minutes by default, each retry a step; 0 keeps them forever");

    static final Flag CGROUP_ROOT = new Flag("cgroup-root", "CGROUP_ROOT", "/sys/fs/cgroup",
            "where the host's cgroup hierarchies are mounted (v2, or v1 with its blkio hierarchy): volumes' IO limits go "
                    + "into the cgroups kubelet makes for the pods there");
    static final Flag IO_LIMITS_RESYNC = new Flag("io-limits-resync", "IO_LIMITS_RESYNC", "30s",
            "how often every volume's IO limits are applied again to the pods it is published to, besides at start, at "
                    + "publish and when they change: on cgroup v1 a container started later gets them at the next pass; "
                    + "0: never");

    private NodeServer() {}

    private static List<Flag> flags() {
        List<Flag> flags = new java.util.ArrayList<>(List.of(NODE_ID, POOL_DIR, KUBELET_DIR, CONTROLLER_ADDRESS, AGENT_ADDRESS, ADVERTISE_HOST, MAX_VOLUMES,
                ABANDONED_COPY_EXPIRY, CGROUP_ROOT, IO_LIMITS_RESYNC));
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
                    var log = context.log();
                    String nodeId = nodeId(flags.get(NODE_ID));
                    Duration abandonedCopyExpiry = flags.durationValue(ABANDONED_COPY_EXPIRY);
                    Path cgroupRoot = absolute(CGROUP_ROOT, flags.get(CGROUP_ROOT));
                    Duration resyncPeriod = flags.durationValue(IO_LIMITS_RESYNC);
                    var controllers = ControllerAddresses.parse(CONTROLLER_ADDRESS.name(), flags.get(CONTROLLER_ADDRESS));
                    AgentSecurity security = AgentSecurity.fromFlags(flags, context.environment(), log);
                    Topology topology = Topology.forDriver(context.plugin().name());
                    Path poolDir = poolDir(flags.get(POOL_DIR));
                    Path kubeletDir = kubeletDir(flags.get(KUBELET_DIR));
                    Command commands = new Command();
                    Kernel kernel = new Kernel();
                    SystemSteps steps = new SystemSteps(context.metrics());
                    LoopDevices loops = new MeteredLoopDevices(new SystemLoopDevices(kernel), steps);
                    Mounter mounter = new MeteredMounter(new SystemMounter(kernel, commands, MountHelpers.system()), steps);
                    SystemFilesystemStats stats = new SystemFilesystemStats();
                    Crashes<CrashPoint> crashes = Crashes.fromEnvironment(CrashPoint.class, log);
                    ImageFiles files = new MeteredImageFiles(new SystemImageFiles(kernel, stats), steps);
                    ImagePool pool = new ImagePool(poolDir, files, loops, mounter,
                            new MeteredFilesystemFreezer(new SystemFilesystemFreezer(kernel), steps), crashes, Clock.systemUTC(), log);
                    PoolMetrics.register(pool, context.metrics());
                    VolumeLocks locks = new VolumeLocks();
                    VolumeIoLimits ioLimits = new VolumeIoLimits(pool, mounter, kubeletDir,
                            new SystemPodCgroups(cgroupRoot), context.metrics(), log);
                    // At start, once the pool is reconciled and before any call; then every --io-limits-resync.
                    Periodic ioLimitsResync = new Periodic("io-limits-resync", resyncPeriod, ioLimits::applyAll);
                    PoolOwnership ownership = new PoolOwnership(pool);
                    // After the pool's reconcile, before any call: a copy abandoned while the node was down goes at start.
                    AbandonedCopies abandoned = new AbandonedCopies(pool, locks, abandonedCopyExpiry, context.metrics(), log);
                    Inventory inventory = new Inventory(pool);
                    TcpComponent agent = new TcpComponent(
                            TcpComponent.address(AGENT_ADDRESS.name(), flags.get(AGENT_ADDRESS)), security.serverTls(),
                            List.of(new NodeAgentService(pool, locks, new ImageContent(files), inventory, ioLimits, context.metrics(), crashes, log)),
                            security.verifiers(), log);
                    Registration registration = new Registration(new ControllerAddresses(controllers, ControllerAddresses.SYSTEM, log), nodeId,
                            flags.get(ADVERTISE_HOST), agent::port, topology.of(nodeId).getSegmentsMap(), pool, inventory, security, log);
                    Filesystems filesystems = new MeteredFilesystems(SystemFilesystems.preferringLibblkid(commands), steps);
                    // The backends, one line each; NodeBackends chooses among them by volume id and context.
                    NodeBackends backends = new NodeBackends(List.of(
                            new LocalNodeBackend(nodeId, pool, loops, filesystems, mounter, stats, ioLimits,
                                    new VolumeEncryption(new SystemEncryptedDevices(commands), filesystems, crashes, log), crashes, log),
                            NfsNodeWiring.fromFlags(context, commands, mounter)));
                    return new DriverProgram.Plan(
                            List.of(new IdentityService(context.plugin(), IdentityService.DRIVER_CAPABILITIES, ownership::ready),
                                    new NodeService(nodeId, topology, flags.intValue(MAX_VOLUMES, 0, 1 << 20), backends, locks, kubeletDir, poolDir)),
                            List.of(ownership, abandoned, ioLimitsResync, agent, registration), ownership::ready);
                });
        System.exit(program.run(args, System.getenv(), System.out, System.err));
    }

    /** Volume ids carry the node id, so it must be a node name: this also keeps it within CSI's 256 bytes. */
    static String nodeId(String value) throws UsageException {
        if (!VolumeId.nodeIdAllowed(value)) {
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

    private static Path absolute(Flag flag, String value) throws UsageException {
        Path path = Path.of(value);
        if (!path.isAbsolute()) {
            throw new UsageException("flag --" + flag.name() + " must be an absolute path, got '" + value + "'");
        }
        return path;
    }

    private static Path poolDir(String value) throws UsageException {
        Path dir = Path.of(value);
        if (!dir.isAbsolute()) {
            throw new UsageException("flag --pool-dir must be an absolute path, got '" + value + "'");
        }
        try {
            return Files.createDirectories(dir).toRealPath();
        } catch (IOException e) {
            throw new UsageException("cannot use pool directory " + dir + ": " + e.getMessage());
        }
    }
}
