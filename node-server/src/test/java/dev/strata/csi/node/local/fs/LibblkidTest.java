package dev.strata.csi.node.local.fs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.system.Command;
import dev.strata.csi.testing.Programs;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * libblkid in the process finds what the blkid program finds (the probe decides whether a
 * volume may be formatted). Image files stand in for devices: blkid probes both alike.
 */
class LibblkidTest {

    @TempDir
    Path dir;

    private final SignatureProbe library = Libblkid.load().orElseThrow(
            () -> new AssertionError("libblkid.so.1 (util-linux) is not loadable"));
    private final SignatureProbe program = new BlkidCommand(new Command());

    @Test
    void aBlankImageHoldsNothing() throws Exception {
        Path image = image("blank.img");
        assertEquals(Optional.empty(), program.probe(image));
        assertEquals(Optional.empty(), library.probe(image));
    }

    @Test
    void findsEachFilesystemTheDriverMakes() throws Exception {
        for (String fsType : new String[] {"ext4", "xfs", "btrfs"}) {
            Path image = image(fsType + ".img");
            // Checked: as a user without root, mkfs.btrfs refuses while a mounted loop device's image is out of that
            // user's reach (a root test running beside this one: "cannot check mount status"); the failure says so.
            Programs.run("mkfs." + fsType, "-q", image.toString());
            assertEquals(Optional.of(fsType), program.probe(image));
            assertEquals(Optional.of(fsType), library.probe(image));
        }
    }

    @Test
    void aPartitionTableIsData() throws Exception {
        Path image = image("mbr.img");
        // An MBR with one Linux partition from sector 2048 to the end: entry 1 at 446, signature at 510.
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
            ByteBuffer entry = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
            entry.put(4, (byte) 0x83).putInt(8, 2048).putInt(12, (int) (file.length() / 512) - 2048);
            file.seek(446);
            file.write(entry.array());
            file.seek(510);
            file.write(new byte[] {0x55, (byte) 0xaa});
        }
        assertEquals(Optional.of("dos"), program.probe(image));
        assertEquals(Optional.of("dos"), library.probe(image));
    }

    @Test
    void twoSignaturesAreAnErrorNotAChoice() throws Exception {
        Path image = image("both.img");
        Path btrfs = image("btrfs.img");
        Programs.run("mkfs.ext4", "-q", image.toString());
        Programs.run("mkfs.btrfs", "-q", btrfs.toString());
        // btrfs's superblock at 64 KiB beside ext4's at 1 KiB
        Programs.run("dd", "if=" + btrfs, "of=" + image, "bs=4096", "skip=16", "seek=16", "count=1", "conv=notrunc", "status=none");
        assertThrows(DeviceException.class, () -> program.probe(image));
        DeviceException e = assertThrows(DeviceException.class, () -> library.probe(image));
        assertTrue(e.getMessage().contains("ambivalent"), e.getMessage());
    }

    @Test
    void aMissingDeviceIsAnError() {
        DeviceException e = assertThrows(DeviceException.class, () -> library.probe(dir.resolve("missing")));
        assertEquals("blkid probe of " + dir.resolve("missing") + ": cannot open it: No such file or directory (ENOENT)",
                e.getMessage());
    }

    private Path image(String name) throws Exception {
        Path image = dir.resolve(name);
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
            file.setLength(320L << 20); // mkfs.xfs wants 300 MiB
        }
        return image;
    }
}
