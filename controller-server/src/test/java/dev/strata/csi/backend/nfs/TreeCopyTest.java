package dev.strata.csi.backend.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.testing.FileTrees;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.QuotaFilesystems;
import dev.strata.csi.testing.Root;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Random;
import java.util.SortedMap;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The copy snapshots, restores and clones make, on real filesystems (btrfs and xfs loop-mounted, ext4). */
class TreeCopyTest {

    @TempDir
    Path dir;

    @Test
    void keepsModesOwnersLinksAndTimesFollowsNoLinkAndSkipsSpecialFiles() throws Exception {
        Root.require();
        Path source = Files.createDirectories(dir.resolve("volume"));
        Path outside = Files.createDirectories(dir.resolve("outside"));
        Files.writeString(outside.resolve("secret"), "the controller's own file");
        Files.createDirectories(source.resolve("d/e"));
        Files.write(source.resolve("d/e/file"), random(300_000));
        Files.createLink(source.resolve("d/hard"), source.resolve("d/e/file"));
        Files.createSymbolicLink(source.resolve("to-outside"), outside); // a pod's link to a directory it cannot see
        Files.createSymbolicLink(source.resolve("d/to-secret"), outside.resolve("secret"));
        Programs.run("chown", "4321:8765", source.resolve("d/e/file").toString());
        Programs.run("chmod", "6751", source.resolve("d/e/file").toString());
        Programs.run("chmod", "1777", source.resolve("d").toString());
        Programs.run("chmod", "0500", source.resolve("d/e").toString());
        Programs.run("mkfifo", source.resolve("fifo").toString());
        SortedMap<String, String> before = FileTrees.describe(source);

        TreeCopy.Result result = TreeCopy.copy(source, dir.resolve("copy"));

        SortedMap<String, String> expected = new java.util.TreeMap<>(before);
        expected.remove("fifo");
        assertEquals(expected, FileTrees.describe(dir.resolve("copy")));
        assertEquals(1, result.skipped(), "the FIFO");
        assertEquals(300_000, result.bytes(), "the file once: its hard link is a link");
        assertTrue(Files.isSymbolicLink(dir.resolve("copy/to-outside")));
        assertFalse(Files.exists(dir.resolve("copy/outside")));
        assertEquals(Files.readAttributes(dir.resolve("copy/d/e/file"), "unix:ino").get("ino"),
                Files.readAttributes(dir.resolve("copy/d/hard"), "unix:ino").get("ino"), "the hard link stays one file");
        assertEquals(600_000, TreeCopy.bytes(dir.resolve("copy")), "a hard-linked file counts at each of its names");
        assertThrows(java.nio.file.FileAlreadyExistsException.class, () -> TreeCopy.copy(source, dir.resolve("copy")));

        TreeCopy.remove(dir.resolve("copy"));
        assertFalse(Files.exists(dir.resolve("copy"), LinkOption.NOFOLLOW_LINKS));
        assertEquals("the controller's own file", Files.readString(outside.resolve("secret")), "removing never follows a link");
    }

    @Test
    void aDirectorySwappedForALinkDuringTheCopyFailsItInsteadOfLeadingOut() throws Exception {
        Root.require();
        Path source = Files.createDirectories(dir.resolve("volume"));
        Path outside = Files.createDirectories(dir.resolve("outside"));
        Files.writeString(outside.resolve("secret"), "the controller's own file");
        // Many directories, one swapped for a link to outside by a "pod" while the copy runs.
        for (int i = 0; i < 400; i++) {
            Files.write(Files.createDirectories(source.resolve("d" + i)).resolve("f"), random(2000));
        }
        Thread pod = Thread.ofPlatform().start(() -> {
            try {
                for (int i = 399; i >= 0; i--) {
                    Path victim = source.resolve("d" + i);
                    Files.move(victim, source.resolve("moved" + i));
                    Files.createSymbolicLink(victim, outside);
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        try {
            TreeCopy.copy(source, dir.resolve("copy"));
        } catch (java.io.IOException e) {
            // a directory swapped between listing and opening: refused (ELOOP), never followed
        }
        pod.join();
        try (var files = Files.walk(dir.resolve("copy"))) {
            assertFalse(files.anyMatch(path -> path.getFileName().toString().equals("secret")),
                    "nothing from outside the volume is in the copy");
        }
    }

    /** btrfs and xfs (reflink=1, mkfs.xfs's default) share the source's extents; ext4 copies. */
    @ParameterizedTest
    @ValueSource(strings = {"btrfs", "xfs", "ext4"})
    void contentIsReflinkedWhereTheFilesystemCan(String type) throws Exception {
        Root.require();
        Path image = dir.resolve(type + ".img");
        Path mount = dir.resolve(type);
        String mkfs = switch (type) {
            case "btrfs" -> "mkfs.btrfs -q";
            case "xfs" -> "mkfs.xfs -q -f"; // reflink=1 is mkfs.xfs's default
            default -> "mkfs.ext4 -q -F";
        };
        Programs.run("sh", "-c", "truncate -s 320M '" + image + "' && " + mkfs + " '" + image + "'");
        Files.createDirectories(mount);
        Programs.run("mount", "-o", "loop", image.toString(), mount.toString());
        try {
            Path source = Files.createDirectories(mount.resolve("volume"));
            Files.write(source.resolve("data"), random(8 << 20));
            Programs.run("sync");
            TreeCopy.copy(source, mount.resolve("copy"));
            Programs.run("sync");
            assertEquals(FileTrees.sha256(source.resolve("data")), FileTrees.sha256(mount.resolve("copy/data")));
            String extents = Programs.run("filefrag", "-v", mount.resolve("copy/data").toString());
            assertEquals(!type.equals("ext4"), extents.contains("shared"), type + ": " + extents);
        } finally {
            QuotaFilesystems.unmount(mount);
        }
    }

    private static byte[] random(int size) {
        byte[] bytes = new byte[size];
        new Random(size).nextBytes(bytes);
        return bytes;
    }
}
