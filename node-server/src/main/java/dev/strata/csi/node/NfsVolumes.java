package dev.strata.csi.node;

import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCondition;
import csi.v1.Csi.VolumeUsage;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.FilesystemStats;
import dev.strata.csi.mount.FilesystemUsage;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.mount.Mounter;
import dev.strata.csi.mount.NfsMounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Bounded;
import dev.strata.csi.volume.Capabilities;
import dev.strata.csi.volume.FileMode;
import dev.strata.csi.volume.NfsCapabilities;
import dev.strata.csi.volume.NfsVolume;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Stage, publish and their undoing for NFS volumes: the share is mounted once per node at the
 * staging path and bind-mounted into each pod. Nothing here stats a path on a mounted share
 * outside a deadline, so a server that stops answering slows its own volumes' calls down, never
 * the node-server. Unstaging and unpublishing go by the mount table alone, and so also serve
 * volumes whose ids this node cannot read (static volumes: a PersistentVolume's volumeHandle).
 */
public final class NfsVolumes {

    private final Mounter mounter;
    private final NfsMounter nfs;
    private final FilesystemStats stats;
    private final Duration deadline;
    private final Log log;

    public NfsVolumes(Mounter mounter, NfsMounter nfs, FilesystemStats stats, Duration deadline, Log log) {
        this.mounter = mounter;
        this.nfs = nfs;
        this.stats = stats;
        this.deadline = deadline;
        this.log = log;
    }

    void stage(NfsVolume volume, Path staging, VolumeCapability capability, Map<String, String> context) throws Exception {
        if (!Files.isDirectory(staging)) {
            throw CsiException.invalidArgument("staging_target_path " + staging + " is not a directory");
        }
        Optional<MountPoint> mounted = mounter.table().at(staging);
        if (mounted.isPresent()) {
            if (isShare(mounted.get(), volume)) {
                return;
            }
            throw CsiException.alreadyExists("staging_target_path " + staging + " already has something else mounted ("
                    + mounted.get().source() + ")");
        }
        String modeValue = context.getOrDefault(FileMode.PARAMETER, "");
        Optional<Integer> mode = modeValue.isEmpty() ? Optional.empty() : Optional.of(FileMode.parse(modeValue));
        boolean readOnly = NfsCapabilities.readOnlyMode(capability);
        List<String> options = new ArrayList<>(capability.getMount().getMountFlagsList());
        if (readOnly) {
            options.add("ro");
        }
        nfs.mount(volume, staging, options);
        if (!mounter.table().at(staging).map(m -> isShare(m, volume)).orElse(false)) {
            throw CsiException.internal("mount of " + volume.source() + " at " + staging + " reported success, but the share is not mounted there");
        }
        if (mode.isPresent() && !readOnly) {
            Bounded.call(deadline, "setting mode " + FileMode.format(mode.get()) + " on " + volume.source(), () -> {
                Files.setPosixFilePermissions(staging, FileMode.permissions(mode.get()));
                return null;
            });
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
        unmountAll(staging);
    }

    void publish(NfsVolume volume, Path staging, Path target, VolumeCapability capability, boolean readOnly) throws Exception {
        MountTable table = mounter.table();
        Optional<MountPoint> share = table.at(staging).filter(m -> isShare(m, volume));
        if (share.isEmpty()) {
            throw CsiException.failedPrecondition("volume " + volume.source() + " is not staged at " + staging + "; NodeStageVolume first");
        }
        Optional<MountPoint> present = table.at(target);
        if (present.isPresent()) {
            if (isShare(present.get(), volume) && present.get().readOnly() == readOnly) {
                return;
            }
            throw CsiException.alreadyExists("target_path " + target + " is already published with other arguments");
        }
        if (Capabilities.singleWriter(capability)) {
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
        unmountAll(target);
        RequestPaths.removeTarget(target);
    }

    /** Usage of the share mounted at {@code path}; NOT_FOUND when no share is. */
    NodeGetVolumeStatsResponse stats(String volumeId, Path path) throws Exception {
        if (!mounter.table().at(path).map(NfsMounter::isNfs).orElse(false)) {
            throw CsiException.notFound("volume " + CsiException.printable(volumeId) + " is not mounted at " + path);
        }
        FilesystemUsage usage = Bounded.call(deadline, "reading usage of " + path, () -> stats.usage(path));
        return NodeGetVolumeStatsResponse.newBuilder()
                .addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.BYTES)
                        .setTotal(usage.totalBytes()).setAvailable(usage.availableBytes()).setUsed(usage.usedBytes()))
                .addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.INODES)
                        .setTotal(usage.totalInodes()).setAvailable(usage.freeInodes()).setUsed(usage.usedInodes()))
                .setVolumeCondition(VolumeCondition.newBuilder().setAbnormal(false).setMessage("the server answers"))
                .build();
    }

    /**
     * The other mounts of the share mounted at staging: pods' binds of it. They show the same
     * filesystem (device) and the same directory of it (root); shares of one server may share a
     * device, but not a root.
     */
    private static List<MountPoint> binds(MountTable table, MountPoint share) {
        return table.all().stream()
                .filter(m -> m.id() != share.id() && m.device().equals(share.device()) && m.root().equals(share.root())
                        && NfsMounter.isNfs(m))
                .toList();
    }

    /** Whether {@code mount} is this volume's share (staged, or bound from the staging path). */
    private static boolean isShare(MountPoint mount, NfsVolume volume) {
        return NfsMounter.isNfs(mount) && mount.source().equals(volume.source());
    }

    /** Unmounts until nothing is mounted at {@code path}; a share's mount is taken off with {@link NfsMounter}'s escalation. */
    private void unmountAll(Path path) throws Exception {
        for (int i = 0; i < 8; i++) {
            Optional<MountPoint> top = mounter.table().at(path);
            if (top.isEmpty()) {
                return;
            }
            if (NfsMounter.isNfs(top.get())) {
                nfs.unmount(path);
            } else {
                mounter.unmount(path);
            }
        }
        if (mounter.table().isMountPoint(path)) {
            throw new MountException(path + " is still mounted after 8 unmounts");
        }
    }
}
