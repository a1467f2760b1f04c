package dev.strata.csi.node;

import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCondition;
import csi.v1.Csi.VolumeUsage;
import dev.strata.csi.backend.local.LocalCapabilities;
import dev.strata.csi.backend.nfs.FileMode;
import dev.strata.csi.backend.nfs.NfsCapabilities;
import dev.strata.csi.backend.nfs.NfsMounter;
import dev.strata.csi.backend.nfs.NfsProbe;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.FilesystemUsage;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Stage, publish and their undoing for NFS volumes: the share is mounted once per node at the
 * staging path and bind-mounted into each pod. Nothing here stats a path on a mounted share but
 * through {@link NfsProbe} (a child process killed at the deadline), so a server that stops
 * answering slows its own volumes' calls down to the deadline, never a thread of the node-server.
 * Unstaging and unpublishing go by the mount table alone, and so also serve volumes whose ids
 * this node cannot read (static volumes: a PersistentVolume's volumeHandle). A share whose server
 * restarted with another export answers ESTALE: stage and publish then mount it afresh, and
 * NodeGetVolumeStats reports it abnormal until they do.
 */
public final class NfsVolumes {

    private final Mounter mounter;
    private final NfsMounter nfs;
    private final NfsProbe probe;
    private final Log log;

    public NfsVolumes(Mounter mounter, NfsMounter nfs, NfsProbe probe, Log log) {
        this.mounter = mounter;
        this.nfs = nfs;
        this.probe = probe;
        this.log = log;
    }

    void stage(NfsVolume volume, Path staging, VolumeCapability capability, Map<String, String> context) throws Exception {
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
        boolean readOnly = NfsCapabilities.readOnlyMode(capability);
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
    void unstage(Path staging) throws Exception {
        MountTable table = mounter.table();
        Optional<MountPoint> share = table.at(staging).filter(NfsMounter::isNfs);
        if (share.isPresent()) {
            List<MountPoint> binds = binds(table, share.get());
            if (!binds.isEmpty()) {
                throw CsiException.failedPrecondition("the share at " + staging + " is still published at "
                        + binds.getFirst().mountPoint() + "; NodeUnpublishVolume first");
            }
        }
        unmountShares(staging);
    }

    /**
     * Binds the staged share onto the target. A stale share (ESTALE: its server restarted with
     * another export) is mounted afresh at the staging path and bound again at the target.
     */
    void publish(NfsVolume volume, Path staging, Path target, VolumeCapability capability, Map<String, String> context,
            boolean readOnly) throws Exception {
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
        if (LocalCapabilities.singleWriter(capability)) {
            List<MountPoint> others = binds(table, share.get());
            if (!others.isEmpty()) {
                throw CsiException.failedPrecondition("volume " + volume.source() + " has single-writer access and is already published at "
                        + others.getFirst().mountPoint());
            }
        }
        RequestPaths.makeTarget(target, false);
        mounter.bindMount(staging, target, readOnly);
    }

    void unpublish(Path target) throws Exception {
        unmountShares(target);
        RequestPaths.removeTarget(target);
    }

    /**
     * Usage of the share mounted at {@code path}; NOT_FOUND when no share is. A server that does
     * not answer, or a stale share, is an abnormal volume condition, not an error: kubelet then
     * reports it on the pod.
     */
    NodeGetVolumeStatsResponse stats(String volumeId, Path path) throws Exception {
        Optional<MountPoint> mount = mounter.table().at(path).filter(NfsMounter::isNfs);
        if (mount.isEmpty()) {
            throw CsiException.notFound("volume " + CsiException.printable(volumeId) + " is not mounted at " + path);
        }
        FilesystemUsage usage;
        try {
            usage = probe.usage(path);
        } catch (NfsProbe.Unhealthy e) {
            return NodeGetVolumeStatsResponse.newBuilder()
                    .setVolumeCondition(VolumeCondition.newBuilder().setAbnormal(true).setMessage(unhealthy(mount.get(), e.health())))
                    .build();
        }
        return NodeGetVolumeStatsResponse.newBuilder()
                .addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.BYTES)
                        .setTotal(usage.totalBytes()).setAvailable(usage.availableBytes()).setUsed(usage.usedBytes()))
                .addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.INODES)
                        .setTotal(usage.totalInodes()).setAvailable(usage.freeInodes()).setUsed(usage.usedInodes()))
                .setVolumeCondition(VolumeCondition.newBuilder().setAbnormal(false).setMessage("the server answers"))
                .build();
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

    /** Unmounts everything at {@code path}; a share's mount comes off with {@link NfsMounter}'s escalation. */
    private void unmountShares(Path path) throws MountException {
        mounter.unmountAll(path, top -> {
            if (NfsMounter.isNfs(top)) {
                nfs.unmount(path);
            } else {
                mounter.unmount(path);
            }
        });
    }
}
