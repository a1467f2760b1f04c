package dev.strata.csi.node.backend;

import csi.v1.Csi.NodeGetVolumeStatsResponse;
import csi.v1.Csi.VolumeCondition;
import csi.v1.Csi.VolumeUsage;
import dev.strata.csi.node.mount.FilesystemUsage;

/** The NodeGetVolumeStats reply, made one way for every backend. */
public final class VolumeStats {

    private VolumeStats() {}

    /** A mounted filesystem: bytes and inodes. */
    public static NodeGetVolumeStatsResponse filesystem(FilesystemUsage usage, VolumeCondition condition) {
        return NodeGetVolumeStatsResponse.newBuilder()
                .addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.BYTES)
                        .setTotal(usage.totalBytes()).setAvailable(usage.availableBytes()).setUsed(usage.usedBytes()))
                .addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.INODES)
                        .setTotal(usage.totalInodes()).setAvailable(usage.freeInodes()).setUsed(usage.usedInodes()))
                .setVolumeCondition(condition)
                .build();
    }

    /** A raw block device: its size only. */
    public static NodeGetVolumeStatsResponse block(long totalBytes, VolumeCondition condition) {
        return NodeGetVolumeStatsResponse.newBuilder()
                .addUsage(VolumeUsage.newBuilder().setUnit(VolumeUsage.Unit.BYTES).setTotal(totalBytes))
                .setVolumeCondition(condition)
                .build();
    }

    /** No usage could be read: the condition says why. */
    public static NodeGetVolumeStatsResponse conditionOnly(VolumeCondition condition) {
        return NodeGetVolumeStatsResponse.newBuilder().setVolumeCondition(condition).build();
    }

    public static VolumeCondition healthy(String message) {
        return VolumeCondition.newBuilder().setAbnormal(false).setMessage(message).build();
    }

    public static VolumeCondition abnormal(String message) {
        return VolumeCondition.newBuilder().setAbnormal(true).setMessage(message).build();
    }
}
