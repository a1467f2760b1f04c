package dev.strata.csi.node;

import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCondition;
import csi.v1.Csi.VolumeUsage;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.backend.local.CrashPoint;
import dev.strata.csi.backend.local.Crashes;
import dev.strata.csi.backend.local.DeviceException;
import dev.strata.csi.backend.local.Filesystems;
import dev.strata.csi.backend.local.ImagePool;
import dev.strata.csi.backend.local.LocalCapabilities;
import dev.strata.csi.backend.local.LoopDevice;
import dev.strata.csi.backend.local.LoopDevices;
import dev.strata.csi.backend.local.VolumeId;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.FilesystemStats;
import dev.strata.csi.mount.FilesystemUsage;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * Stage, publish and their undoing for local volumes, written as the spec reads. The mount table
 * is the truth about what is mounted where; every step first checks whether it is already done,
 * so a repeated call succeeds without a second effect.
 */
public final class LocalVolumes {

    private final ImagePool pool;
    private final LoopDevices loops;
    private final Filesystems filesystems;
    private final Mounter mounter;
    private final FilesystemStats stats;
    private final Crashes crashes;
    private final Log log;

    public LocalVolumes(ImagePool pool, LoopDevices loops, Filesystems filesystems, Mounter mounter,
            FilesystemStats stats, Crashes crashes, Log log) {
        this.crashes = crashes;
        this.pool = pool;
        this.loops = loops;
        this.filesystems = filesystems;
        this.mounter = mounter;
        this.stats = stats;
        this.log = log;
    }

    void stage(VolumeId id, Path staging, VolumeCapability capability) throws Exception {
        LoopDevice device = attachedDevice(id);
        if (!Files.isDirectory(staging)) {
            throw CsiException.invalidArgument("staging_target_path " + staging + " is not a directory");
        }
        if (LocalCapabilities.isBlock(capability)) {
            pool.recordBlockUse(id.name());
            return; // a raw block volume is published straight from its device
        }
        Optional<MountPoint> mounted = mounter.table().at(staging);
        if (mounted.isPresent()) {
            if (device.backs(mounted.get())) {
                return;
            }
            throw CsiException.alreadyExists("staging_target_path " + staging + " already has another filesystem mounted ("
                    + mounted.get().source() + ")");
        }
        String fsType = LocalCapabilities.fsType(capability);
        boolean readOnly = LocalCapabilities.readOnlyMode(capability);
        String holds = readOnly ? existingFilesystem(id, device) : holdsFilesystem(id, device, fsType);
        if (!holds.equals(fsType)) {
            throw CsiException.failedPrecondition("volume " + id + " holds a " + holds
                    + " filesystem; it cannot be staged as " + fsType + " (the driver never reformats a volume with data)");
        }
        List<String> options = new java.util.ArrayList<>(capability.getMount().getMountFlagsList());
        if (readOnly) {
            options.add("ro");
            if (fsType.equals("ext4")) {
                options.add("noload"); // no journal replay: a read-only volume is not written at all
            }
        }
        mounter.mount(device.device().toString(), staging, fsType, options);
        crashes.reach(CrashPoint.STAGE_MOUNTED);
    }

    /** The filesystem a read-only stage mounts: one must be there already; nothing is made. */
    private String existingFilesystem(VolumeId id, LoopDevice device) throws Exception {
        String recorded = pool.content(id.name()).getFilesystem();
        if (!recorded.isEmpty()) {
            return recorded;
        }
        return filesystems.probe(device.device()).orElseThrow(() -> CsiException.failedPrecondition(
                "volume " + id + " has no filesystem yet; it cannot be staged read-only before it was written"));
    }

    /**
     * The filesystem on the volume, made now if the volume is new. Formatting needs two signs that
     * the device is blank: the agent's record says no filesystem was ever made and it was never
     * used as a raw block device, and blkid finds no signature. A probe that cannot read the
     * device therefore never leads to mkfs on a volume with data.
     */
    private String holdsFilesystem(VolumeId id, LoopDevice device, String fsType) throws Exception {
        var content = pool.content(id.name());
        if (!content.getFilesystem().isEmpty()) {
            return content.getFilesystem();
        }
        if (content.getUsedAsBlock()) {
            throw CsiException.failedPrecondition("volume " + id + " was used as a raw block device; making a "
                    + fsType + " filesystem on it would destroy that data");
        }
        Optional<String> existing = filesystems.formatIfBlank(device.device(), fsType);
        String holds = existing.orElse(fsType);
        if (existing.isEmpty()) {
            log.info("made filesystem", "volume", id, "device", device.device(), "fs_type", fsType);
            crashes.reach(CrashPoint.STAGE_FORMATTED);
        }
        pool.recordFilesystem(id.name(), holds);
        crashes.reach(CrashPoint.STAGE_RECORDED);
        return holds;
    }

    void unstage(Path staging) throws Exception {
        mounter.unmountAll(staging);
        crashes.reach(CrashPoint.UNSTAGE_UNMOUNTED);
    }

    void publish(VolumeId id, Path staging, Path target, VolumeCapability capability, boolean readOnly) throws Exception {
        LoopDevice device = attachedDevice(id);
        MountTable table = mounter.table();
        boolean block = LocalCapabilities.isBlock(capability);
        if (!block && !table.at(staging).map(device::backs).orElse(false)) {
            throw CsiException.failedPrecondition("volume " + id + " is not staged at " + staging + "; NodeStageVolume first");
        }
        Optional<MountPoint> present = table.at(target);
        if (present.isPresent()) {
            if (device.backs(present.get()) && present.get().readOnly() == readOnly) {
                return;
            }
            throw CsiException.alreadyExists("target_path " + target + " is already published with other arguments");
        }
        if (LocalCapabilities.singleWriter(capability)) {
            List<MountPoint> others = table.all().stream()
                    .filter(m -> device.backs(m) && !m.mountPoint().equals(staging))
                    .toList();
            if (!others.isEmpty()) {
                throw CsiException.failedPrecondition("volume " + id + " has single-writer access and is already published at "
                        + others.getFirst().mountPoint());
            }
        }
        RequestPaths.makeTarget(target, block);
        crashes.reach(CrashPoint.PUBLISH_TARGET_MADE);
        mounter.bindMount(block ? device.device() : staging, target, readOnly);
        crashes.reach(CrashPoint.PUBLISH_MOUNTED);
    }

    void unpublish(Path target) throws Exception {
        mounter.unmountAll(target);
        crashes.reach(CrashPoint.UNPUBLISH_UNMOUNTED);
        RequestPaths.removeTarget(target);
    }

    NodeGetVolumeStatsResponse stats(VolumeId id, Path path) throws Exception {
        Path image = pool.imagePath(id.name());
        Optional<MountPoint> mount = mounter.table().at(path);
        // The loop device says which image a mount is of, also when the image file was deleted.
        Optional<LoopDevice> device = mount.isEmpty() ? Optional.empty()
                : pool.device(id.name()).filter(loop -> loop.backs(mount.get()));
        if (device.isEmpty()) {
            throw CsiException.notFound("volume " + id + " is not mounted at " + path);
        }
        var reply = NodeGetVolumeStatsResponse.newBuilder();
        if (!Files.isDirectory(path)) { // a published block volume: the device node bound onto a file
            reply.addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.BYTES).setTotal(loops.sizeBytes(device.get().device())));
        } else {
            FilesystemUsage usage = stats.usage(path);
            reply.addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.BYTES)
                    .setTotal(usage.totalBytes()).setAvailable(usage.availableBytes()).setUsed(usage.usedBytes()));
            reply.addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.INODES)
                    .setTotal(usage.totalInodes()).setAvailable(usage.freeInodes()).setUsed(usage.usedInodes()));
        }
        return reply.setVolumeCondition(condition(id, image)).build();
    }

    /** Abnormal when the image file or the pool's record of it is gone from under a mounted volume. */
    private VolumeCondition condition(VolumeId id, Path image) throws Exception {
        if (!Files.exists(image)) {
            return VolumeCondition.newBuilder().setAbnormal(true)
                    .setMessage("image file " + image + " is missing; the volume lives on only while it stays mounted").build();
        }
        if (pool.get(id.name()).isEmpty()) {
            return VolumeCondition.newBuilder().setAbnormal(true).setMessage("the pool has no record of volume " + id).build();
        }
        return VolumeCondition.newBuilder().setAbnormal(false).setMessage("healthy").build();
    }

    private LoopDevice attachedDevice(VolumeId id) throws Exception {
        if (!pool.exists(id.name())) {
            throw CsiException.notFound("volume " + id + " does not exist on this node");
        }
        return loops.find(pool.imagePath(id.name())).orElseThrow(() -> CsiException.failedPrecondition(
                "volume " + id + " is not attached to this node; ControllerPublishVolume first"));
    }
}
