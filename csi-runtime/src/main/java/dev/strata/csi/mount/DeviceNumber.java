package dev.strata.csi.mount;

/** A device's major:minor number, as the kernel names block devices and filesystems in mountinfo and sysfs. */
public record DeviceNumber(int major, int minor) {

    public DeviceNumber {
        if (major < 0 || minor < 0) {
            throw new IllegalArgumentException("device number " + major + ":" + minor + " is negative");
        }
    }

    /** Parses {@code "7:3"}. */
    public static DeviceNumber parse(String text) {
        String trimmed = text.strip();
        int colon = trimmed.indexOf(':');
        if (colon < 0) {
            throw new IllegalArgumentException("not a major:minor device number: " + text);
        }
        try {
            return new DeviceNumber(Integer.parseInt(trimmed.substring(0, colon)), Integer.parseInt(trimmed.substring(colon + 1)));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a major:minor device number: " + text, e);
        }
    }

    @Override
    public String toString() {
        return major + ":" + minor;
    }
}
