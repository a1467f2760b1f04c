package dev.strata.csi.node.local;

import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeCondition;
import dev.strata.csi.backend.Capabilities;
import dev.strata.csi.backend.local.LocalCapabilities;
import dev.strata.csi.backend.local.LocalVolumeScheme;
import dev.strata.csi.backend.local.LocalVolumeId;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.node.backend.NodeBackend;
import dev.strata.csi.node.backend.OwnMounts;
import dev.strata.csi.node.backend.TargetPaths;
import dev.strata.csi.node.backend.VolumeStats;
import dev.strata.csi.node.local.crypt.MappedDevice;
import dev.strata.csi.node.local.crypt.VolumeEncryption;
import dev.strata.csi.node.local.fs.Filesystems;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.VolumePool;
import dev.strata.csi.node.mount.FilesystemStats;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The local backend on the node: stage, publish and their undoing for volumes of this node's
 * pools, written as the spec reads, the same for every kind of pool ({@link VolumePool}): the
 * pool that holds the volume's name ({@link NodePools}) gives its device. Which device a volume
 * uses is asked of the pool, never taken from the publish context alone: after a reboot the loop
 * device number may differ from the one the attacher recorded. The mount table is the truth about what is mounted where; every step
 * first checks whether it is already done, so a repeated call succeeds without a second effect.
 * An encrypted volume is staged from its dm-crypt mapping over that device ({@link VolumeEncryption}).
 */
public final class LocalNodeBackend implements NodeBackend<LocalVolumeId>, LocalVolumeScheme {

    private final String nodeId;

    private final NodePools pools;
    private final Filesystems filesystems;
    private final Mounter mounter;
    private final FilesystemStats stats;
    private final VolumeIoLimits ioLimits;
    private final VolumeEncryption encryption;
    private final Crashes<CrashPoint> crashes;
    private final Log log;

    public LocalNodeBackend(String nodeId, NodePools pools, Filesystems filesystems, Mounter mounter,
            FilesystemStats stats, VolumeIoLimits ioLimits, VolumeEncryption encryption, Crashes<CrashPoint> crashes, Log log) {
        this.nodeId = nodeId;
        this.encryption = encryption;
        this.ioLimits = ioLimits;
        this.crashes = crashes;
        this.pools = pools;
        this.filesystems = filesystems;
        this.mounter = mounter;
        this.stats = stats;
        this.log = log;
    }

    @Override
    public void stage(LocalVolumeId id, Path staging, VolumeCapability capability, Map<String, String> context) throws Exception {
        stage(id, staging, capability, context, Map.of());
    }

    @Override
    public void stage(LocalVolumeId id, Path staging, VolumeCapability capability, Map<String, String> context,
            Map<String, String> secrets) throws Exception {
        VolumePool pool = pools.holding(id.name());
        BlockDevice attached = attachedDevice(id, pool);
        if (!Files.isDirectory(staging)) {
            throw CsiException.invalidArgument("staging_target_path " + staging + " is not a directory");
        }
        var record = pool.content(id.name());
        BlockDevice device = record.getEncrypted() ? encryption.open(id, record, attached, secrets) : attached;
        if (LocalCapabilities.isBlock(capability)) {
            pool.records().recordBlockUse(id.name());
            return; // a raw block volume is published straight from its device
        }
        Optional<MountPoint> mounted = mounter.table().at(staging);
        if (mounted.isPresent()) {
            if (device.backs(mounted.get())) {
                growCopiedFilesystem(id, pool, device, staging, mounted.get().fsType(), mounted.get().readOnly());
                return;
            }
            throw CsiException.alreadyExists("staging_target_path " + staging + " already has another filesystem mounted ("
                    + mounted.get().source() + ")");
        }
        String fsType = LocalCapabilities.fsType(capability);
        boolean readOnly = CAPABILITIES.readOnly(capability);
        String holds = readOnly ? existingFilesystem(id, pool, device) : holdsFilesystem(id, pool, device, fsType);
        if (!holds.equals(fsType)) {
            throw CsiException.failedPrecondition("volume " + id + " holds a " + holds
                    + " filesystem; it cannot be staged as " + fsType + " (the driver never reformats a volume with data)");
        }
        List<String> options = new java.util.ArrayList<>(capability.getMount().getMountFlagsList());
        if (fsType.equals("xfs") && !options.contains("nouuid")) {
            // A restore or clone carries its source's UUID, and xfs refuses a second filesystem of one UUID on the node.
            options.add("nouuid");
        }
        if (readOnly) {
            options.add("ro");
            if (fsType.equals("ext4")) {
                options.add("noload"); // no journal replay: a read-only volume is not written at all
            }
        }
        mounter.mount(device.device().toString(), staging, fsType, options);
        crashes.reach(CrashPoint.STAGE_MOUNTED);
        growCopiedFilesystem(id, pool, device, staging, fsType, readOnly);
    }

    /**
     * A volume restored or cloned into a larger image holds its source's smaller filesystem: it
     * grows to fill the device once, at its first stage, so the volume comes up at the size asked
     * for (kubelet calls NodeExpandVolume only after an expansion, not after a restore). A
     * read-only mount is not written; it grows at a later writable stage.
     */
    private void growCopiedFilesystem(LocalVolumeId id, VolumePool pool, BlockDevice device, Path staging, String fsType, boolean readOnly) throws Exception {
        if (readOnly || !pool.content(id.name()).getGrowFilesystem()) {
            return;
        }
        filesystems.grow(device.device(), staging, fsType);
        pool.records().recordFilesystemGrown(id.name());
        log.info("filesystem copied from a smaller volume grown", "volume", id, "fs_type", fsType);
    }

    /** The filesystem a read-only stage mounts: one must be there already; nothing is made. */
    private String existingFilesystem(LocalVolumeId id, VolumePool pool, BlockDevice device) throws Exception {
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
    private String holdsFilesystem(LocalVolumeId id, VolumePool pool, BlockDevice device, String fsType) throws Exception {
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
        pool.records().recordFilesystem(id.name(), holds);
        crashes.reach(CrashPoint.STAGE_RECORDED);
        return holds;
    }

    @Override
    public void unstage(LocalVolumeId id, Path staging) throws Exception {
        requireHere(id);
        unmountOwn(id, "staging_target_path", staging);
        crashes.reach(CrashPoint.UNSTAGE_UNMOUNTED);
        encryption.close(id);
    }

    @Override
    public void publish(LocalVolumeId id, Path staging, Path target, VolumeCapability capability, Map<String, String> context,
            boolean readOnly) throws Exception {
        VolumePool pool = pools.holding(id.name());
        BlockDevice attached = attachedDevice(id, pool);
        // Never the ciphertext: an encrypted volume is published from its mapping, opened at stage.
        BlockDevice device = !pool.content(id.name()).getEncrypted() ? attached : encryption.find(id.name()).orElseThrow(
                () -> CsiException.failedPrecondition("volume " + id + " is encrypted and its mapping is not open; NodeStageVolume first"));
        MountTable table = mounter.table();
        boolean block = LocalCapabilities.isBlock(capability);
        if (!block && !table.at(staging).map(device::backs).orElse(false)) {
            throw CsiException.failedPrecondition("volume " + id + " is not staged at " + staging + "; NodeStageVolume first");
        }
        Optional<MountPoint> present = table.at(target);
        if (present.isPresent()) {
            if (device.backs(present.get()) && present.get().readOnly() == readOnly) {
                ioLimits.applyAt(id.name(), target); // kubelet publishes again after a restart of node-server
                return;
            }
            throw CsiException.alreadyExists("target_path " + target + " is already published with other arguments");
        }
        if (Capabilities.singleWriter(capability)) {
            List<MountPoint> others = table.all().stream()
                    .filter(m -> device.backs(m) && !m.mountPoint().equals(staging))
                    .toList();
            if (!others.isEmpty()) {
                throw CsiException.failedPrecondition("volume " + id + " has single-writer access and is already published at "
                        + others.getFirst().mountPoint());
            }
        }
        TargetPaths.makeTarget(target, block);
        crashes.reach(CrashPoint.PUBLISH_TARGET_MADE);
        mounter.bindMount(block ? device.device() : staging, target, readOnly);
        crashes.reach(CrashPoint.PUBLISH_MOUNTED);
        // After the mount: a call cut short before the limits is repeated by kubelet, and finds the mount.
        ioLimits.applyAt(id.name(), target);
    }

    @Override
    public void unpublish(LocalVolumeId id, Path target) throws Exception {
        requireHere(id);
        unmountOwn(id, "target_path", target);
        crashes.reach(CrashPoint.UNPUBLISH_UNMOUNTED);
        TargetPaths.removeTarget(target);
    }

    /**
     * The device takes the volume's size (the agent did when it grew the volume; a device attached
     * since has it already), then the filesystem mounted at {@code volumePath} grows to fill it; an
     * encrypted volume's mapping grows in between, with the passphrase of the node-expand
     * {@code secrets}. A raw block volume needs nothing more.
     */
    @Override
    public long expand(LocalVolumeId id, Path volumePath, Optional<VolumeCapability> capability) throws Exception {
        return expand(id, volumePath, capability, Map.of());
    }

    @Override
    public long expand(LocalVolumeId id, Path volumePath, Optional<VolumeCapability> capability, Map<String, String> secrets)
            throws Exception {
        VolumePool pool = pools.holding(id.name());
        BlockDevice attached = attachedDevice(id, pool);
        long recorded = pool.get(id.name()).orElseThrow(() -> CsiException.notFound("volume " + id + " does not exist on this node"))
                .getCapacityBytes();
        if (pool.deviceBytes(attached) < recorded) {
            pool.refreshDevice(attached);
        }
        long size = pool.deviceBytes(attached);
        BlockDevice device = pool.content(id.name()).getEncrypted() ? encryption.resize(id, secrets) : attached;
        Optional<MountPoint> mount = mounter.table().at(volumePath).filter(device::backs);
        if (mount.isEmpty()) {
            throw CsiException.notFound("volume " + id + " is not staged or published at " + volumePath);
        }
        boolean block = capability.map(LocalCapabilities::isBlock).orElse(!Files.isDirectory(volumePath));
        if (!block) {
            filesystems.grow(device.device(), volumePath, mount.get().fsType());
            crashes.reach(CrashPoint.NODE_EXPAND_GROWN);
            log.info("filesystem grown", "volume", id, "path", volumePath, "fs_type", mount.get().fsType(), "bytes", size);
        }
        return size;
    }

    @Override
    public NodeGetVolumeStatsResponse stats(LocalVolumeId id, Path path) throws Exception {
        requireHere(id);
        VolumePool pool = pools.holding(id.name());
        Optional<MountPoint> mount = mounter.table().at(path);
        // The device (or the mapping over it) says which volume a mount is of, also when an image file was deleted.
        Optional<BlockDevice> device = mount.isEmpty() ? Optional.empty()
                : stagedDevice(id, pool).filter(staged -> staged.backs(mount.get()));
        if (device.isEmpty()) {
            throw CsiException.notFound("volume " + id + " is not mounted at " + path);
        }
        if (!Files.isDirectory(path)) { // a published block volume: the device node bound onto a file
            long size = device.get() instanceof MappedDevice mapped ? mapped.sizeBytes() : pool.deviceBytes(device.get());
            return VolumeStats.block(size, condition(pool, id));
        }
        return VolumeStats.filesystem(stats.usage(path), condition(pool, id));
    }

    /** Abnormal when the volume's storage or the pool's record of it is gone from under a mounted volume. */
    private static VolumeCondition condition(VolumePool pool, LocalVolumeId id) throws Exception {
        return pool.abnormality(id.name()).map(VolumeStats::abnormal).orElseGet(() -> VolumeStats.healthy("healthy"));
    }

    /** NOT_FOUND for a volume of another node's pool. */
    private void requireHere(LocalVolumeId id) {
        if (!id.nodeId().equals(nodeId)) {
            throw CsiException.notFound("volume " + id + " lives on node " + id.nodeId() + ", not on " + nodeId);
        }
    }

    /** The device the volume is staged from: its open mapping, if it is encrypted, else its pool's device. */
    private Optional<BlockDevice> stagedDevice(LocalVolumeId id, VolumePool pool) throws Exception {
        Optional<BlockDevice> mapped = encryption.find(id.name()).map(BlockDevice.class::cast);
        return mapped.isPresent() ? mapped : pool.device(id.name()).map(BlockDevice.class::cast);
    }

    /**
     * Unmounts what the volume's device backs at {@code path}; anything else mounted there stays.
     * The device is looked up only when something is mounted there: kubelet and csi-sanity repeat
     * unpublish and unstage on paths long unmounted, and for an LVM volume each lookup is an lvs.
     */
    private void unmountOwn(LocalVolumeId id, String field, Path path) throws Exception {
        Optional<BlockDevice> device = mounter.table().at(path).isEmpty() ? Optional.empty()
                : stagedDevice(id, pools.holding(id.name()));
        OwnMounts.unmount(mounter, log, id.toString(), field, path, mount -> device.map(d -> d.backs(mount)).orElse(false),
                top -> mounter.unmount(path));
    }

    private BlockDevice attachedDevice(LocalVolumeId id, VolumePool pool) throws Exception {
        requireHere(id);
        if (!pool.exists(id.name())) {
            throw CsiException.notFound("volume " + id + " does not exist on this node");
        }
        return pool.attachedDevice(id.name()).orElseThrow(() -> CsiException.failedPrecondition(
                "volume " + id + " is not attached to this node; ControllerPublishVolume first"));
    }
}
