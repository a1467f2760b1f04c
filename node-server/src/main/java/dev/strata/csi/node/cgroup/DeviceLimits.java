package dev.strata.csi.node.cgroup;

/**
 * IO limits on one block device, as a cgroup holds them: operations and bytes per second, read
 * and write; 0 is no limit.
 */
public record DeviceLimits(long readIops, long writeIops, long readBytesPerSecond, long writeBytesPerSecond) {

    public static final DeviceLimits NONE = new DeviceLimits(0, 0, 0, 0);

    public DeviceLimits {
        if (readIops < 0 || writeIops < 0 || readBytesPerSecond < 0 || writeBytesPerSecond < 0) {
            throw new IllegalArgumentException("negative IO limit");
        }
    }

    public boolean none() {
        return equals(NONE);
    }
}
