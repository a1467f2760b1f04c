package dev.strata.csi.linux;

import dev.strata.csi.mount.DeviceNumber;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;

/**
 * Which file it is: its device and inode numbers. Unlike a path, they are the same in every mount
 * namespace (a loop device's backing file, whose path sysfs shows relative to the namespace that
 * attached it), and for as long as something holds the file open: an inode held open is never
 * reused, so a new file at the same path never matches one removed (a lock file, say).
 */
public record FileIdentity(DeviceNumber device, long inode) {

    /** The identity of {@code file} (links followed), as stat(2) gives it. */
    public static FileIdentity of(Path file) throws IOException {
        Map<String, Object> stat = Files.readAttributes(file, "unix:dev,ino");
        return new FileIdentity(decode((Long) stat.get("dev")), (Long) stat.get("ino"));
    }

    /** The identity of {@code file}, or empty when there is no such file. */
    public static Optional<FileIdentity> ofExisting(Path file) throws IOException {
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
    public static DeviceNumber decode(long dev) {
        int major = (int) (((dev >>> 8) & 0xfffL) | ((dev >>> 32) & 0xfffff000L));
        int minor = (int) ((dev & 0xffL) | ((dev >>> 12) & 0xffffff00L));
        return new DeviceNumber(major, minor);
    }

    @Override
    public String toString() {
        return device + "/" + inode;
    }
}
