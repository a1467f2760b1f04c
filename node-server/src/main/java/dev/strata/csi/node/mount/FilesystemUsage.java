package dev.strata.csi.node.mount;

/**
 * Space and inodes of a mounted filesystem, as CSI's NodeGetVolumeStats reports them.
 * {@code availableBytes} is what an unprivileged writer can still use, so it can be less than
 * {@code totalBytes - usedBytes} when the filesystem reserves blocks for root.
 */
public record FilesystemUsage(long totalBytes, long availableBytes, long usedBytes,
        long totalInodes, long freeInodes, long usedInodes) {}
