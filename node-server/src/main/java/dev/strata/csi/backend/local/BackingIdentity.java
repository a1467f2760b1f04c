package dev.strata.csi.backend.local;

import dev.strata.csi.mount.DeviceNumber;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

/**
 * Which file a loop device holds: the device and inode numbers of its backing file. Unlike the
 * path sysfs shows, which the kernel writes relative to the mount namespace that attached the
 * device (after a container restart it reads {@code /pvc-x.img}), these numbers are the same in
 * every namespace and for as long as the device holds the file: an inode held open is never
 * reused, so a new file at the same path never matches a device of the deleted one.
 */
public record BackingIdentity(DeviceNumber device, long inode) {

    /** The identity of {@code file} (links followed), as stat(2) gives it. */
    public static BackingIdentity of(Path file) throws IOException {
        Map<String, Object> stat = Files.readAttributes(file, "unix:dev,ino");
        return new BackingIdentity(decode((Long) stat.get("dev")), (Long) stat.get("ino"));
    }

    /** The identity of {@code file}, or empty when there is no such file. */
    public static Optional<BackingIdentity> ofExisting(Path file) throws IOException {
        try {
            return Optional.of(of(file));
        } catch (NoSuchFileException e) {
            return Optional.empty();
        }
    }

    /**
     * A {@code dev_t} as glibc's stat and the kernel's LOOP_GET_STATUS64 ({@code lo_device},
     * huge_encode_dev) encode it: minor in bits 0-7 and 20-31, major in bits 8-19 and 32-63.
     */
    static DeviceNumber decode(long dev) {
        int major = (int) (((dev >>> 8) & 0xfffL) | ((dev >>> 32) & 0xfffff000L));
        int minor = (int) ((dev & 0xffL) | ((dev >>> 12) & 0xffffff00L));
        return new DeviceNumber(major, minor);
    }

    @Override
    public String toString() {
        return device + "/" + inode;
    }
}
