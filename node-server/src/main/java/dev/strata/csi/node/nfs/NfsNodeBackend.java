package dev.strata.csi.node.nfs;

import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.backend.nfs.FileMode;
import dev.strata.csi.backend.nfs.NfsMounter;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.backend.nfs.NfsVolumeScheme;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.node.backend.NodeBackend;
import dev.strata.csi.node.backend.OwnMounts;
import dev.strata.csi.node.backend.TargetPaths;
import dev.strata.csi.node.backend.VolumeStats;
import dev.strata.csi.node.mount.FilesystemUsage;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The NFS backend on the node: stage, publish and their undoing for NFS volumes. The share is
 * mounted once per node at the staging path and bind-mounted into each pod. A volume is NFS when
 * its id says so ({@link NfsVolumeId}), or, for a static volume, when its volume context names a
 * server and a share; in the calls without a context, any id no backend's scheme claims is taken
 * for a static NFS volume, and served by the mount table alone. Nothing here stats a path on a mounted share but
 * through {@link NfsProbe} (a child process killed at the deadline), so a server that stops
 * answering slows its own volumes' calls down to the deadline, never a thread of the node-server.
 * Unstaging and unpublishing go by the mount table alone, and so also serve volumes whose ids
 * name no share (static volumes: a PersistentVolume's volumeHandle): what they take off is the
 * share the id names, or for a static volume an NFS mount, never anything else at the path. A share whose server
 * restarted with another export answers ESTALE: stage and publish then mount it afresh, and
 * NodeGetVolumeStats reports it abnormal until they do.
 */
public final class NfsNodeBackend implements NodeBackend<NfsNodeBackend.Share>, NfsVolumeScheme<NfsNodeBackend.Share> {

    /** NFS volumes are locked by id, which for a static volume may be any string: kept apart from the pool's image names. */
    private static final String LOCK_PREFIX = "nfs ";

    /**
     * An NFS volume as a call names it: its id, and where its share is, known from the id or the
     * volume context; unknown (empty) in the calls that carry no context for a static volume.
     */
    public record Share(String volumeId, Optional<NfsVolume> volume) {

        NfsVolume described() {
            return volume.orElseThrow(() -> CsiException.notFound("volume " + CsiException.printable(volumeId) + " does not exist"));
        }
    }


    private final Mounter mounter;
    private final NfsMounter nfs;
    private final NfsProbe probe;
    private final Log log;

    public NfsNodeBackend(Mounter mounter, NfsMounter nfs, NfsProbe probe, Log log) {
        this.mounter = mounter;
        this.nfs = nfs;
        this.probe = probe;
        this.log = log;
    }

    @Override
    public Optional<Share> byId(String volumeId) {
        return NfsVolumeId.parse(volumeId).map(id -> new Share(volumeId, Optional.of(id.volume())));
    }

    @Override
    public Optional<Share> byContext(String volumeId, Map<String, String> context) {
        return NfsVolume.fromContext(context).map(volume -> new Share(volumeId, Optional.of(volume)));
    }

    @Override
    public Optional<Share> byStaticId(String volumeId) {
        return Optional.of(new Share(volumeId, Optional.empty()));
    }

    @Override
    public String lockKey(Share share) {
        return LOCK_PREFIX + share.volumeId();
    }

    @Override
    public void stage(Share share, Path staging, VolumeCapability capability, Map<String, String> context) throws Exception {
        NfsVolume volume = share.described();
        Optional<MountPoint> mounted = mounter.table().at(staging);
        if (mounted.isPresent()) {
            if (!isShare(mounted.get(), volume)) {
                throw CsiException.alreadyExists("staging_target_path " + staging + " already has something else mounted ("
                        + mounted.get().source() + ")");
            }
            if (requireAnswers(mounted.get(), staging) == NfsProbe.Health.ANSWERS) {
                return;
            }
            nfs.unmount(staging);
        } else if (!Files.isDirectory(staging)) { // nothing mounted there: a local directory, safe to stat
            throw CsiException.invalidArgument("staging_target_path " + staging + " is not a directory");
        }
        mount(volume, staging, capability, context);
    }

    private void mount(NfsVolume volume, Path staging, VolumeCapability capability, Map<String, String> context) throws Exception {
        String modeValue = context.getOrDefault(FileMode.PARAMETER, "");
        Optional<Integer> mode = modeValue.isEmpty() ? Optional.empty() : Optional.of(FileMode.parse(modeValue));
        boolean readOnly = CAPABILITIES.readOnly(capability);
        List<String> options = new ArrayList<>(capability.getMount().getMountFlagsList());
        if (readOnly) {
            options.add("ro");
        }
        try {
            nfs.mount(volume, staging, options);
        } catch (MountException e) {
            // mount(8) killed at the deadline may have got the share mounted just before: take it off again.
            if (mounter.table().at(staging).map(m -> isShare(m, volume)).orElse(false)) {
                nfs.unmount(staging);
            }
            throw e;
        }
        if (!mounter.table().at(staging).map(m -> isShare(m, volume)).orElse(false)) {
            throw CsiException.internal("mount of " + volume.source() + " at " + staging + " reported success, but the share is not mounted there");
        }
        if (mode.isPresent() && !readOnly) {
            try {
                probe.chmod(staging, mode.get());
            } catch (NfsProbe.Unhealthy e) {
                throw CsiException.unavailable("setting mode " + FileMode.format(mode.get()) + " on " + volume.source() + ": " + e.getMessage());
            }
        }
        log.info("mounted NFS share", "source", volume.source(), "path", staging, "options", String.join(",", options));
    }

    /** Unmounts the share; FAILED_PRECONDITION while a pod's bind of it is still mounted, which would then be left on a dead mount. */
    @Override
    public void unstage(Share volume, Path staging) throws Exception {
        MountTable table = mounter.table();
        Optional<MountPoint> share = table.at(staging).filter(NfsMounter::isNfs);
        if (share.isPresent()) {
            List<MountPoint> binds = binds(table, share.get());
            if (!binds.isEmpty()) {
                throw CsiException.failedPrecondition("the share at " + staging + " is still published at "
                        + binds.getFirst().mountPoint() + "; NodeUnpublishVolume first");
            }
        }
        unmountShares(volume, "staging_target_path", staging);
    }

    /**
     * Binds the staged share onto the target. A stale share (ESTALE: its server restarted with
     * another export) is mounted afresh at the staging path and bound again at the target.
     */
    @Override
    public void publish(Share published, Path staging, Path target, VolumeCapability capability, Map<String, String> context,
            boolean readOnly) throws Exception {
        NfsVolume volume = published.described();
        MountTable table = mounter.table();
        Optional<MountPoint> share = table.at(staging).filter(m -> isShare(m, volume));
        if (share.isEmpty()) {
            throw CsiException.failedPrecondition("volume " + volume.source() + " is not staged at " + staging + "; NodeStageVolume first");
        }
        Optional<MountPoint> present = table.at(target);
        if (present.isPresent()) {
            if (!isShare(present.get(), volume) || present.get().readOnly() != readOnly) {
                throw CsiException.alreadyExists("target_path " + target + " is already published with other arguments");
            }
            if (requireAnswers(present.get(), target) == NfsProbe.Health.ANSWERS) {
                return;
            }
            nfs.unmount(target);
        }
        if (requireAnswers(share.get(), staging) == NfsProbe.Health.STALE) {
            nfs.unmount(staging);
            mount(volume, staging, capability, context);
        }
        table = mounter.table();
        share = table.at(staging).filter(m -> isShare(m, volume));
        if (share.isEmpty()) {
            throw CsiException.failedPrecondition("volume " + volume.source() + " is not staged at " + staging + "; NodeStageVolume first");
        }
        if (Capabilities.singleWriter(capability)) {
            List<MountPoint> others = binds(table, share.get());
            if (!others.isEmpty()) {
                throw CsiException.failedPrecondition("volume " + volume.source() + " has single-writer access and is already published at "
                        + others.getFirst().mountPoint());
            }
        }
        TargetPaths.makeTarget(target, false);
        mounter.bindMount(staging, target, readOnly);
    }

    @Override
    public void unpublish(Share share, Path target) throws Exception {
        unmountShares(share, "target_path", target);
        TargetPaths.removeTarget(target);
    }

    /** A share has nothing to grow on the node: its size is the export's (ControllerExpandVolume raised the limit). */
    @Override
    public long expand(Share share, Path volumePath, Optional<VolumeCapability> capability) throws Exception {
        if (mounter.table().at(volumePath).filter(NfsMounter::isNfs).isEmpty()) {
            throw CsiException.notFound("volume " + CsiException.printable(share.volumeId()) + " is not mounted at " + volumePath);
        }
        return 0;
    }

    /**
     * Usage of the share mounted at {@code path}; NOT_FOUND when no share is. A server that does
     * not answer, or a stale share, is an abnormal volume condition, not an error: kubelet then
     * reports it on the pod.
     */
    @Override
    public NodeGetVolumeStatsResponse stats(Share share, Path path) throws Exception {
        Optional<MountPoint> mount = mounter.table().at(path).filter(NfsMounter::isNfs);
        if (mount.isEmpty()) {
            throw CsiException.notFound("volume " + CsiException.printable(share.volumeId()) + " is not mounted at " + path);
        }
        FilesystemUsage usage;
        try {
            usage = probe.usage(path);
        } catch (NfsProbe.Unhealthy e) {
            return VolumeStats.conditionOnly(VolumeStats.abnormal(unhealthy(mount.get(), e.health())));
        }
        return VolumeStats.filesystem(usage, VolumeStats.healthy("the server answers"));
    }

    /** The share's health at {@code path}: ANSWERS or STALE; UNAVAILABLE when its server does not answer. */
    private NfsProbe.Health requireAnswers(MountPoint mount, Path path) throws Exception {
        NfsProbe.Health health = probe.health(path);
        if (health == NfsProbe.Health.NOT_RESPONDING) {
            throw CsiException.unavailable(unhealthy(mount, health));
        }
        if (health == NfsProbe.Health.STALE) {
            log.warn("NFS share is stale; mounting it afresh", "source", mount.source(), "path", path);
        }
        return health;
    }

    private static String unhealthy(MountPoint mount, NfsProbe.Health health) {
        return switch (health) {
            case NOT_RESPONDING -> "NFS server " + server(mount) + " not responding";
            case STALE -> "NFS share " + mount.source() + " is stale (the server restarted with another export);"
                    + " the next NodeStageVolume or NodePublishVolume mounts it afresh";
            case ANSWERS -> "the server answers";
        };
    }

    /** The server part of a share's source: {@code 10.0.0.5} of {@code 10.0.0.5:/exports}, {@code [fd00::1]} of an IPv6 one. */
    private static String server(MountPoint mount) {
        int colon = mount.source().indexOf(":/");
        return colon < 0 ? mount.source() : mount.source().substring(0, colon);
    }

    /**
     * The other mounts of the share mounted at staging: pods' binds of it. They show the same
     * filesystem (device), directory of it (root) and source. Mounts of one server's export share
     * a device, and NFS lists each mount's root as "/", so the source tells volumes apart.
     */
    private static List<MountPoint> binds(MountTable table, MountPoint share) {
        return table.all().stream()
                .filter(m -> m.id() != share.id() && m.device().equals(share.device()) && m.root().equals(share.root())
                        && m.source().equals(share.source()) && NfsMounter.isNfs(m))
                .toList();
    }

    /** Whether {@code mount} is this volume's share (staged, or bound from the staging path). */
    private static boolean isShare(MountPoint mount, NfsVolume volume) {
        return NfsMounter.isNfs(mount) && mount.source().equals(volume.source());
    }

    /**
     * Unmounts the volume's share at {@code path}, with {@link NfsMounter}'s escalation: mounts of
     * the share the id names, or for a static volume NFS mounts; anything else stays.
     */
    private void unmountShares(Share share, String field, Path path) throws MountException {
        OwnMounts.unmount(mounter, log, CsiException.printable(share.volumeId()), field, path,
                mount -> share.volume().map(v -> isShare(mount, v)).orElse(NfsMounter.isNfs(mount)), top -> nfs.unmount(path));
    }
}
