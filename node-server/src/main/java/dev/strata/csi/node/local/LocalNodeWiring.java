package dev.strata.csi.node.local;

import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.backend.local.LocalTopology;
import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.metrics.SystemSteps;
import dev.strata.csi.node.agent.AbandonedCopies;
import dev.strata.csi.node.agent.ControllerAddresses;
import dev.strata.csi.node.agent.Inventory;
import dev.strata.csi.node.agent.SnapshotTombstones;
import dev.strata.csi.node.agent.NodeAgentService;
import dev.strata.csi.node.agent.PoolOwnership;
import dev.strata.csi.node.agent.Registration;
import dev.strata.csi.node.cgroup.SystemPodCgroups;
import dev.strata.csi.node.local.crypt.AcceptedPassphrases;
import dev.strata.csi.node.local.crypt.SystemEncryptedDevices;
import dev.strata.csi.node.local.crypt.VolumeEncryption;
import dev.strata.csi.node.local.fs.Filesystems;
import dev.strata.csi.node.local.fs.MeteredFilesystemFreezer;
import dev.strata.csi.node.local.fs.MeteredFilesystems;
import dev.strata.csi.node.local.fs.SystemFilesystemFreezer;
import dev.strata.csi.node.local.fs.SystemFilesystems;
import dev.strata.csi.node.local.image.ImageFiles;
import dev.strata.csi.node.local.image.LoopDevices;
import dev.strata.csi.node.local.image.MeteredImageFiles;
import dev.strata.csi.node.local.image.MeteredLoopDevices;
import dev.strata.csi.node.local.image.SystemImageFiles;
import dev.strata.csi.node.local.image.SystemLoopDevices;
import dev.strata.csi.node.local.lvm.SystemLogicalVolumes;
import dev.strata.csi.node.local.lvm.SystemThinMappings;
import dev.strata.csi.node.local.pool.ImagePool;
import dev.strata.csi.node.local.pool.LvmPool;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.PoolMetrics;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.node.mount.SystemFilesystemStats;
import dev.strata.csi.rpc.VolumeLocks;
import dev.strata.csi.server.Component;
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
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The local backend of node-server, put together from its flags: this node's pools (the image
 * pool unless {@code --image-pool=false}, and an LVM pool when {@code --volume-group} names one), the node agent that serves them to
 * controller-server and registers with it, and the node backend that stages and publishes their
 * volumes. NodeServer names it in one line.
 *
 * @param backend    the node backend for NodeBackends
 * @param components the agent's parts, in the order they start: the pools' ownership and
 *                   reconcile first, before any call
 * @param poolDir    the image pool's directory, which no request path may lead into
 */
public record LocalNodeWiring(LocalNodeBackend backend, List<Component> components, PoolOwnership ownership, Path poolDir) {

    public static final Flag POOL_DIR = Flag.of("pool-dir", "/var/lib/strata/pool",
            "directory holding this node's volume images and their records (and the LVM pool's records, in lvm/<group>)");
    public static final Flag IMAGE_POOL = Flag.bool("image-pool", true,
            "whether this node takes new volumes of StorageClasses with pool: image (the default) as image files in --pool-dir; "
                    + "false: a node with the LVM pool only (needs --volume-group), which reports no image pool, so that no such "
                    + "volume is placed there; --pool-dir still holds the agent's lock and the LVM pool's records");
    public static final Flag VOLUME_GROUP = Flag.of("volume-group", "",
            "LVM volume group of this node's LVM pool, for StorageClasses with pool: lvm (empty: no LVM pool); the "
                    + "driver's logical volumes carry the tag strata.csi.dev, the group's other volumes are never touched");
    public static final Flag THIN_POOL = Flag.of("thin-pool", "",
            "thin pool (a logical volume of --volume-group) that thin volumes and snapshots are made in (lvType: thin, the "
                    + "default); empty: the LVM pool makes linear volumes only");
    public static final Flag CONTROLLER_ADDRESS = Flag.of("controller-address", null,
            "host:port of controller-server's agent registry, or a comma-separated list; the agent registers with every "
                    + "address each name resolves to (a headless Service: every replica), resolved again at every renewal");
    public static final Flag AGENT_ADDRESS = Flag.of("agent-address", "0.0.0.0:9870",
            "host:port the node agent listens on for controller-server (port 0 picks a free one)");
    public static final Flag ADVERTISE_HOST = new Flag("agent-advertise-host", "NODE_IP", "127.0.0.1",
            "host or IP controller-server dials to reach this agent (usually status.hostIP via the downward API)");
    public static final Flag ABANDONED_COPY_EXPIRY = Flag.of("abandoned-copy-expiry", "1h",
            "a volume or snapshot copy partly received from another node (restore or clone across nodes, a snapshot's copy) "
                    + "that no step of its copy touched for "
                    + "this long is removed, its capacity freed: its PVC was deleted and nobody comes back for it. A copy in "
                    + "progress records a step at least every 64 MiB, and external-provisioner retries CreateVolume at least "
                    + "every 5 minutes by default, each retry a step; 0 keeps them forever");
    public static final Flag CGROUP_ROOT = Flag.of("cgroup-root", "/sys/fs/cgroup",
            "where the host's cgroup hierarchies are mounted (v2, or v1 with its blkio hierarchy): volumes' IO limits go "
                    + "into the cgroups kubelet makes for the pods there");
    public static final Flag IO_LIMITS_RESYNC = Flag.of("io-limits-resync", "30s",
            "how often every volume's IO limits are applied again to the pods it is published to, besides at start, at "
                    + "publish and when they change: on cgroup v1 a container started later gets them at the next pass; "
                    + "0: never");

    /** LVM's rule for volume group and logical volume names. */
    private static final Pattern LVM_NAME = Pattern.compile("[A-Za-z0-9+_.][A-Za-z0-9+_.-]{0,126}");

    public static List<Flag> flags() {
        return List.of(POOL_DIR, IMAGE_POOL, VOLUME_GROUP, THIN_POOL, CONTROLLER_ADDRESS, AGENT_ADDRESS, ADVERTISE_HOST, ABANDONED_COPY_EXPIRY,
                CGROUP_ROOT, IO_LIMITS_RESYNC);
    }

    /** What the local backend shares with the rest of node-server: the node, and the system's narrow interfaces. */
    public record Node(String nodeId, LocalTopology topology, Path kubeletDir, Kernel kernel, Command commands,
            Mounter mounter, SystemSteps steps, VolumeLocks locks) { }

    public static LocalNodeWiring fromFlags(DriverProgram.Context context, Node node) throws UsageException {
        var flags = context.flags();
        var log = context.log();
        Path poolDir = poolDir(flags.get(POOL_DIR));
        Duration abandonedCopyExpiry = flags.durationValue(ABANDONED_COPY_EXPIRY);
        Path cgroupRoot = absolute(CGROUP_ROOT, flags.get(CGROUP_ROOT));
        Duration resyncPeriod = flags.durationValue(IO_LIMITS_RESYNC);
        var controllers = ControllerAddresses.parse(CONTROLLER_ADDRESS.name(), flags.get(CONTROLLER_ADDRESS));
        String volumeGroup = lvmName(VOLUME_GROUP, flags.get(VOLUME_GROUP));
        String thinPool = lvmName(THIN_POOL, flags.get(THIN_POOL));
        if (volumeGroup.isEmpty() && !thinPool.isEmpty()) {
            throw new UsageException("flag --thin-pool names a thin pool of --volume-group, which is not set");
        }
        boolean imageVolumes = flags.booleanValue(IMAGE_POOL);
        if (!imageVolumes && volumeGroup.isEmpty()) {
            throw new UsageException("flag --image-pool=false leaves this node no pool: name an LVM volume group with --volume-group");
        }
        // After the flags: a flag given wrong is said before the agent's credentials are read.
        AgentSecurity security = AgentSecurity.fromFlags(AgentSecurity.Side.NODE, flags, context.environment(), log);
        SystemSteps steps = node.steps();
        LoopDevices loops = new MeteredLoopDevices(new SystemLoopDevices(node.kernel()), steps);
        SystemFilesystemStats stats = new SystemFilesystemStats();
        Crashes<CrashPoint> crashes = Crashes.fromEnvironment(CrashPoint.class, log);
        ImageFiles files = new MeteredImageFiles(new SystemImageFiles(node.kernel(), stats), steps);
        ImagePool images = new ImagePool(poolDir, files, loops, node.mounter(),
                new MeteredFilesystemFreezer(new SystemFilesystemFreezer(node.kernel()), steps), crashes, Clock.systemUTC(), log);
        Optional<LvmPool> lvm = Optional.empty();
        if (!volumeGroup.isEmpty()) {
            Path records = poolDir.resolve("lvm").resolve(volumeGroup);
            try {
                Files.createDirectories(records);
            } catch (IOException e) {
                throw new UsageException("cannot use " + records + " for the LVM pool's records: " + e.getMessage());
            }
            lvm = Optional.of(new LvmPool(records, new SystemLogicalVolumes(node.commands(), volumeGroup, thinPool, log),
                    new SystemThinMappings(node.commands(), volumeGroup, thinPool, log), node.mounter(), crashes, Clock.systemUTC(), log));
        }
        NodePools pools = new NodePools(images, imageVolumes, lvm);
        PoolMetrics.register(pools, context.metrics());
        VolumeLocks locks = node.locks();
        VolumeIoLimits ioLimits = new VolumeIoLimits(pools, node.mounter(), node.kubeletDir(), new SystemPodCgroups(cgroupRoot),
                context.metrics(), log);
        // At start, once the pools are reconciled and before any call; then every --io-limits-resync.
        Periodic ioLimitsResync = new Periodic("io-limits-resync", resyncPeriod, ioLimits::applyAll);
        PoolOwnership ownership = new PoolOwnership(pools);
        // After the pools' reconcile, before any call: a copy abandoned while the node was down goes at start.
        AbandonedCopies abandoned = new AbandonedCopies(pools, locks, abandonedCopyExpiry, context.metrics(), log);
        // Beside the pools' own directories: records that outlive the snapshots they stand for.
        SnapshotTombstones tombstones = new SnapshotTombstones(poolDir.resolve("tombstones"));
        Inventory inventory = new Inventory(pools, tombstones);
        TcpComponent agent = new TcpComponent(
                TcpComponent.address(AGENT_ADDRESS.name(), flags.get(AGENT_ADDRESS)), security.serverTls(),
                List.of(new NodeAgentService(pools, locks, inventory, tombstones, ioLimits, context.metrics(), crashes, log)),
                security.verifiers(log), log);
        Registration registration = new Registration(new ControllerAddresses(controllers, ControllerAddresses.SYSTEM, log), node.nodeId(),
                flags.get(ADVERTISE_HOST), agent::port, node.topology().of(node.nodeId()).getSegmentsMap(), pools, inventory,
                security, log);
        Filesystems filesystems = new MeteredFilesystems(SystemFilesystems.preferringLibblkid(node.commands()), steps);
        LocalNodeBackend backend = new LocalNodeBackend(node.nodeId(), pools, filesystems, node.mounter(), stats, ioLimits,
                new VolumeEncryption(new SystemEncryptedDevices(node.commands()), filesystems,
                        new AcceptedPassphrases(context.metrics(), log), crashes, log), crashes, log);
        return new LocalNodeWiring(backend, List.of(ownership, abandoned, ioLimitsResync, agent, registration), ownership, poolDir);
    }

    /** Empty, or a name LVM takes. */
    private static String lvmName(Flag flag, String value) throws UsageException {
        if (!value.isEmpty() && !LVM_NAME.matcher(value).matches()) {
            throw new UsageException("flag --" + flag.name() + " must be an LVM name (letters, digits, '+', '_', '.', '-', not "
                    + "beginning with '-', at most 127), got '" + value + "'");
        }
        return value;
    }

    private static Path absolute(Flag flag, String value) throws UsageException {
        Path path = Path.of(value);
        if (!path.isAbsolute()) {
            throw new UsageException("flag --" + flag.name() + " must be an absolute path, got '" + value + "'");
        }
        return path;
    }

    private static Path poolDir(String value) throws UsageException {
        Path dir = absolute(POOL_DIR, value);
        try {
            return Files.createDirectories(dir).toRealPath();
        } catch (IOException e) {
            throw new UsageException("cannot use pool directory " + dir + ": " + e.getMessage());
        }
    }
}
