package dev.strata.csi.node.local.fs;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.image.InMemoryLoopDevices;
import dev.strata.csi.node.mount.Mounter;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * An in-memory stand-in for {@link SystemFilesystems}, for unit tests without root or mkfs: a
 * filesystem is a signature line at the start of the image ({@value #MAGIC} type size), written
 * and read through the loop device ({@link InMemoryLoopDevices#channel}), so it lives in the image
 * file as a real superblock does: through detach and attach, and into copies. As the real one,
 * formatIfBlank leaves any signature alone (data is never formatted away), takes only ext4, xfs
 * and btrfs, and grow works only on a filesystem mounted at the path given, to the device's
 * current size. Where it differs: nothing else of a filesystem exists. {@link #failNext} fails
 * the next call of one kind before it acts.
 */
public final class InMemoryFilesystems implements Filesystems {

    static final String MAGIC = "STRATA-TEST-FS";
    private static final int SIGNATURE_BYTES = 128;
    private static final List<String> SUPPORTED = List.of("btrfs", "ext4", "xfs");

    private final InMemoryLoopDevices loops;
    private final Mounter mounter;
    private final Set<String> failNext = new HashSet<>();

    /** What a signature says: a filesystem type (or partition table type) and the bytes it spans. */
    public record Signature(String type, long bytes) {}

    public InMemoryFilesystems(InMemoryLoopDevices loops, Mounter mounter) {
        this.loops = loops;
        this.mounter = mounter;
    }

    /** The next call of {@code call} (probe, format or grow) fails before it acts. */
    public synchronized void failNext(String call) {
        failNext.add(call);
    }

    /** The signature at the start of an image file, as a test reads it without the driver. */
    public static Optional<Signature> signature(Path image) throws IOException {
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "r")) {
            return parse(file.getChannel());
        }
    }

    /** Writes a signature on an image file: a filesystem or partition table that something other than the driver made. */
    public static void sign(Path image, String type, long bytes) throws IOException {
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
            write(file.getChannel(), new Signature(type, bytes));
        }
    }

    @Override
    public synchronized Optional<String> probe(Path device) throws DeviceException {
        fail("probe", "blkid -p " + device);
        return read(device).map(Signature::type);
    }

    @Override
    public synchronized Optional<String> formatIfBlank(Path device, String fsType) throws DeviceException {
        if (!SUPPORTED.contains(fsType)) {
            throw new UnsupportedFilesystemException("cannot create filesystem type \"" + fsType + "\"; supported: "
                    + String.join(", ", SUPPORTED));
        }
        Optional<String> existing = probe(device);
        if (existing.isPresent()) {
            return existing;
        }
        fail("format", "mkfs." + fsType + " " + device);
        try {
            write(loops.channel(device), new Signature(fsType, loops.sizeBytes(device)));
        } catch (IOException e) {
            throw new DeviceException("mkfs." + fsType + " " + device + ": " + e.getMessage(), e);
        }
        return Optional.empty();
    }

    @Override
    public synchronized void grow(Path device, Path mountPoint, String fsType) throws DeviceException {
        fail("grow", "grow " + fsType + " on " + device);
        if (!SUPPORTED.contains(fsType)) {
            throw new UnsupportedFilesystemException("cannot grow filesystem type \"" + fsType + "\"; supported: " + String.join(", ", SUPPORTED));
        }
        try {
            boolean mounted = mounter.table().at(mountPoint).filter(m -> m.source().equals(device.toString())).isPresent();
            if (!mounted) {
                throw new DeviceException("grow " + fsType + " on " + device + ": it is not mounted at " + mountPoint);
            }
            Signature on = read(device).filter(s -> s.type().equals(fsType))
                    .orElseThrow(() -> new DeviceException("grow " + fsType + " on " + device + ": no " + fsType + " filesystem there"));
            write(loops.channel(device), new Signature(on.type(), loops.sizeBytes(device)));
        } catch (MountException | IOException e) {
            throw new DeviceException("grow " + fsType + " on " + device + ": " + e.getMessage(), e);
        }
    }

    private Optional<Signature> read(Path device) throws DeviceException {
        try {
            return parse(loops.channel(device));
        } catch (IOException e) {
            throw new DeviceException("blkid -p " + device + ": " + e.getMessage(), e);
        }
    }

    private static Optional<Signature> parse(FileChannel channel) throws IOException {
        ByteBuffer bytes = ByteBuffer.allocate(SIGNATURE_BYTES);
        channel.read(bytes, 0);
        String text = new String(bytes.array(), 0, bytes.position(), StandardCharsets.US_ASCII);
        if (!text.startsWith(MAGIC + " ")) {
            return Optional.empty();
        }
        String[] fields = text.substring(0, text.indexOf('\n')).split(" ");
        return Optional.of(new Signature(fields[1], Long.parseLong(fields[2])));
    }

    private static void write(FileChannel channel, Signature signature) throws IOException {
        channel.write(ByteBuffer.wrap((MAGIC + " " + signature.type() + " " + signature.bytes() + "\n").getBytes(StandardCharsets.US_ASCII)), 0);
    }

    private void fail(String call, String what) throws DeviceException {
        if (failNext.remove(call)) {
            throw new DeviceException(what + ": injected failure of " + call);
        }
    }
}
