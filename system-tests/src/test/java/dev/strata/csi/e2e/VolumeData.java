package dev.strata.csi.e2e;

import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.Random;

/** The data the tests write into a volume and read back: random bytes, compared by their SHA-256. */
final class VolumeData {

    private VolumeData() {}

    /**
     * Writes {@code bytes} random bytes (seeded by the path, so a run can be repeated) to {@code file}
     * and syncs them to the volume: a crash or a detach that follows finds them on the device.
     * Returns the SHA-256 of what the file then holds.
     */
    static String write(Path file, long bytes) throws Exception {
        byte[] data = new byte[Math.toIntExact(bytes)];
        new Random(file.toString().hashCode()).nextBytes(data);
        Files.write(file, data);
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
            channel.force(true);
        }
        return read(file);
    }

    /** The SHA-256 of {@code file}'s content. */
    static String read(Path file) throws Exception {
        return sha256(Files.readAllBytes(file));
    }

    static String sha256(byte[] data) throws Exception {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
    }
}
