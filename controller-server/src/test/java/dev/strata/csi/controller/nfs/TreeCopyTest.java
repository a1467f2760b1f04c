package dev.strata.csi.controller.nfs;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.strata.csi.linux.FileDescriptor;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.testing.FileTrees;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.QuotaFilesystems;
import dev.strata.csi.testing.Root;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.UserDefinedFileAttributeView;
import java.util.List;
import java.util.Random;
import java.util.SortedMap;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The copy snapshots, restores and clones make, on real filesystems (btrfs and xfs loop-mounted, ext4). */
@Tag("root")
class TreeCopyTest {

    static final Kernel KERNEL = new Kernel();

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

        TreeCopy.Result result = TreeCopy.copy(KERNEL, source, dir.resolve("copy"));

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
        assertThrows(java.nio.file.FileAlreadyExistsException.class, () -> TreeCopy.copy(KERNEL, source, dir.resolve("copy")));

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
            TreeCopy.copy(KERNEL, source, dir.resolve("copy"));
        } catch (java.io.IOException e) {
            // a directory swapped between listing and opening: refused (ELOOP), never followed
        }
        pod.join();
        try (var files = Files.walk(dir.resolve("copy"))) {
            assertFalse(files.anyMatch(path -> path.getFileName().toString().equals("secret")),
                    "nothing from outside the volume is in the copy");
        }
    }

    /**
     * Files that a "pod" keeps swapping for links to a file outside, and back, while the volume is
     * copied again and again: each file is opened only once its path is shown to name the file the
     * directory listing read, so no copy ever holds the outside file's bytes or attributes.
     */
    @Test
    void filesSwappedForLinksDuringTheCopyNeverLeadOut() throws Exception {
        Root.require();
        Path source = Files.createDirectories(dir.resolve("volume"));
        Path secret = Files.createDirectories(dir.resolve("outside")).resolve("secret");
        Files.writeString(secret, "the controller's own file");
        Files.getFileAttributeView(secret, UserDefinedFileAttributeView.class).write("secret", StandardCharsets.UTF_8.encode("x"));
        Path held = Files.createDirectories(dir.resolve("held"));
        Path links = Files.createDirectories(dir.resolve("links"));
        int count = 20;
        for (int i = 0; i < count; i++) {
            Files.write(source.resolve("f" + i), random(2000));
            Files.createSymbolicLink(links.resolve("f" + i), secret);
        }
        java.util.concurrent.atomic.AtomicBoolean copying = new java.util.concurrent.atomic.AtomicBoolean(true);
        Thread pod = Thread.ofPlatform().start(() -> {
            try {
                while (copying.get()) {
                    for (int i = 0; i < count; i++) {
                        String name = "f" + i;
                        Files.move(source.resolve(name), held.resolve(name), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
                        Files.move(links.resolve(name), source.resolve(name), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
                        Files.move(source.resolve(name), links.resolve(name), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
                        Files.move(held.resolve(name), source.resolve(name), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
                    }
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        try {
            for (int round = 0; round < 200; round++) {
                Path copy = dir.resolve("copy");
                try {
                    TreeCopy.copy(KERNEL, source, copy);
                } catch (java.io.IOException e) {
                    // a file swapped between listing and opening through the directory: refused (ELOOP), never followed
                }
                try (var files = Files.walk(copy)) {
                    for (Path file : files.filter(path -> Files.isRegularFile(path, LinkOption.NOFOLLOW_LINKS)).toList()) {
                        assertEquals(2000, Files.size(file), file + " is a volume's file, in round " + round);
                        assertFalse(Files.getFileAttributeView(file, UserDefinedFileAttributeView.class).list().contains("secret"),
                                file + " in round " + round);
                    }
                }
                TreeCopy.remove(copy);
            }
        } finally {
            copying.set(false);
            pod.join();
        }
    }

    /** btrfs and xfs (reflink=1, mkfs.xfs's default) share the source's extents; ext4 copies. */
    @ParameterizedTest
    @ValueSource(strings = {"btrfs", "xfs", "ext4"})
    void contentIsReflinkedWhereTheFilesystemCan(String type) throws Exception {
        Path mount = loopMounted(type);
        try {
            Path source = Files.createDirectories(mount.resolve("volume"));
            Files.write(source.resolve("data"), random(8 << 20));
            Programs.run("sync");
            TreeCopy.copy(KERNEL, source, mount.resolve("copy"));
            Programs.run("sync");
            assertEquals(FileTrees.sha256(source.resolve("data")), FileTrees.sha256(mount.resolve("copy/data")));
            String extents = Programs.run("filefrag", "-v", mount.resolve("copy/data").toString());
            assertEquals(!type.equals("ext4"), extents.contains("shared"), type + ": " + extents);
        } finally {
            QuotaFilesystems.unmount(mount);
        }
    }

    /**
     * A sparse file stays sparse, and files and directories keep their extended attributes: a
     * user attribute, and a POSIX ACL (system.posix_acl_access, as setfacl writes it). Before, the
     * copy filled holes on ext4 and kept no attribute.
     */
    @ParameterizedTest
    @ValueSource(strings = {"btrfs", "xfs", "ext4"})
    void keepsHolesAndExtendedAttributes(String type) throws Exception {
        Path mount = loopMounted(type);
        try {
            sparseFileWithAttributes(mount.resolve("volume"));
            TreeCopy.Result result = TreeCopy.copy(KERNEL, mount.resolve("volume"), mount.resolve("copy"));
            assertKept(mount.resolve("volume"), mount.resolve("copy"), result);
        } finally {
            QuotaFilesystems.unmount(mount);
        }
    }

    /**
     * The same through a real NFS client, where hack/nfs-vm.sh provides a server (NFSv4.2 on ext4):
     * the tree is made and checked on the server's side, copied through the client, which sees the
     * ACL as system.nfs4_acl.
     */
    @Test
    void keepsHolesAndExtendedAttributesOverNfs() throws Exception {
        String export = System.getenv().getOrDefault("STRATA_NFS_TEST_EXPORT", "");
        String exportDir = System.getenv().getOrDefault("STRATA_NFS_TEST_EXPORT_DIR", "");
        assumeTrue(!export.isEmpty() && !exportDir.isEmpty(), "no NFS server here; hack/nfs-vm.sh runs this test against one");
        Root.require();
        Path client = Files.createDirectories(dir.resolve("client"));
        String name = "tree-copy-test-" + ProcessHandle.current().pid();
        Path server = Files.createDirectories(Path.of(exportDir, name));
        Programs.run("mount", "-t", "nfs4", export, client.toString());
        try {
            sparseFileWithAttributes(server.resolve("volume"));
            TreeCopy.Result result = TreeCopy.copy(KERNEL, client.resolve(name + "/volume"), client.resolve(name + "/copy"));
            Programs.run("sync");
            assertKept(server.resolve("volume"), server.resolve("copy"), result);
        } finally {
            Programs.run("umount", client.toString());
            TreeCopy.remove(server);
        }
    }

    /** A new 320 MiB filesystem of {@code type}, loop-mounted in the test's directory. */
    private Path loopMounted(String type) throws Exception {
        Root.require();
        Path image = dir.resolve(type + ".img");
        Path mount = Files.createDirectories(dir.resolve(type));
        String mkfs = switch (type) {
            case "btrfs" -> "mkfs.btrfs -q";
            case "xfs" -> "mkfs.xfs -q -f"; // reflink=1 is mkfs.xfs's default
            default -> "mkfs.ext4 -q -F";
        };
        Programs.run("sh", "-c", "truncate -s 320M '" + image + "' && " + mkfs + " '" + image + "'");
        Programs.run("mount", "-o", "loop", image.toString(), mount.toString());
        return mount;
    }

    /** {@code volume/dir/sparse}: 96 MiB with two MiB of data; it and its directory with a user attribute and an ACL. */
    private static void sparseFileWithAttributes(Path volume) throws Exception {
        Path source = Files.createDirectories(volume.resolve("dir"));
        Path sparse = source.resolve("sparse");
        try (var file = new java.io.RandomAccessFile(sparse.toFile(), "rw")) {
            file.setLength(96L << 20); // ends in a hole
            file.write(random(1 << 20));
            file.seek(32L << 20);
            file.write(random(1 << 20));
        }
        for (Path path : List.of(sparse, source)) {
            Files.getFileAttributeView(path, UserDefinedFileAttributeView.class).write("note", StandardCharsets.UTF_8.encode(path.getFileName().toString()));
            try (FileDescriptor fd = KERNEL.open(path.toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC)) {
                KERNEL.setXattr(fd, "system.posix_acl_access", accessAcl(1234));
            }
        }
        Programs.run("sync");
    }

    private static void assertKept(Path volume, Path copy, TreeCopy.Result result) throws Exception {
        Path sparse = volume.resolve("dir/sparse");
        Path copied = copy.resolve("dir/sparse");
        assertEquals(FileTrees.sha256(sparse), FileTrees.sha256(copied));
        assertEquals(96L << 20, Files.size(copied));
        assertEquals(2L << 20, result.bytes(), "the bytes of data, holes left out");
        Programs.run("sync");
        long allocated = KERNEL.allocatedBlocks(copied.toString()) * 512;
        assertTrue(allocated <= 4L << 20, copied + " keeps its holes: " + allocated + " bytes allocated");
        for (Path path : List.of(copied, copy.resolve("dir"))) {
            UserDefinedFileAttributeView view = Files.getFileAttributeView(path, UserDefinedFileAttributeView.class);
            java.nio.ByteBuffer note = java.nio.ByteBuffer.allocate(view.size("note"));
            view.read("note", note);
            assertEquals(path.getFileName().toString(), new String(note.array(), StandardCharsets.UTF_8), path.toString());
            try (FileDescriptor fd = KERNEL.open(path.toString(), Kernel.O_RDONLY | Kernel.O_CLOEXEC)) {
                assertArrayEquals(accessAcl(1234), KERNEL.xattr(fd, "system.posix_acl_access").orElseThrow(), path + ": the ACL");
            }
        }
        assertEquals(0, result.attributesRefused());
    }

    /**
     * A POSIX access ACL as the kernel takes it in system.posix_acl_access (version 2, then tag,
     * permissions and id per entry, little-endian): the owner rw-, user {@code uid} r--, the group
     * r--, mask r--, others ---.
     */
    private static byte[] accessAcl(int uid) {
        java.nio.ByteBuffer acl = java.nio.ByteBuffer.allocate(4 + 5 * 8).order(java.nio.ByteOrder.LITTLE_ENDIAN);
        acl.putInt(2);
        int[][] entries = {{0x01, 6, -1}, {0x02, 4, uid}, {0x04, 4, -1}, {0x10, 4, -1}, {0x20, 0, -1}};
        for (int[] entry : entries) {
            acl.putShort((short) entry[0]).putShort((short) entry[1]).putInt(entry[2]);
        }
        return acl.array();
    }

    private static byte[] random(int size) {
        byte[] bytes = new byte[size];
        new Random(size).nextBytes(bytes);
        return bytes;
    }
}
