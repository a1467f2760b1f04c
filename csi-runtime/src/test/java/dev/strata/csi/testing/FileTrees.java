package dev.strata.csi.testing;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Map;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * A directory tree as the tests of snapshots and copies compare it: every entry below the root
 * (and the root itself, as ".") by its relative path, with its type, mode (setuid, setgid and
 * sticky bits included), owner, group, and a regular file's SHA-256, size and modification time,
 * and a link's text; a file of several names is described at the first of them in order, and each
 * other name as a hard link of that one, whatever order a directory lists them in. Two trees with
 * equal descriptions hold the same data the same way.
 */
public final class FileTrees {

    private FileTrees() {}

    public static SortedMap<String, String> describe(Path root) throws IOException {
        SortedMap<String, String> entries = new TreeMap<>();
        Map<Object, SortedSet<String>> namesOfFile = new HashMap<>();
        Files.walkFileTree(root, new SimpleFileVisitor<>() {
            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attributes) throws IOException {
                entries.put(name(dir), "dir " + common(dir));
                return FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attributes) throws IOException {
                String common = common(file);
                if (attributes.isSymbolicLink()) {
                    entries.put(name(file), "link -> " + Files.readSymbolicLink(file) + " " + common);
                } else if (attributes.isRegularFile()) {
                    namesOfFile.computeIfAbsent(attributes.fileKey(), key -> new TreeSet<>()).add(name(file));
                    entries.put(name(file), "file " + attributes.size() + " bytes sha256 " + sha256(file) + " mtime "
                            + attributes.lastModifiedTime() + " " + common);
                } else {
                    entries.put(name(file), "other " + common);
                }
                return FileVisitResult.CONTINUE;
            }

            private String name(Path path) {
                return path.equals(root) ? "." : root.relativize(path).toString();
            }
        });
        // A file of several names: the first in order is described, the others point to it, whatever order the walk took.
        for (SortedSet<String> names : namesOfFile.values()) {
            for (String name : names.tailSet(names.first() + "\0")) {
                entries.put(name, "hard link of " + names.first() + " " + common(root.resolve(name)));
            }
        }
        return entries;
    }

    private static String common(Path path) throws IOException {
        Map<String, Object> unix = Files.readAttributes(path, "unix:mode,uid,gid", LinkOption.NOFOLLOW_LINKS);
        return "mode " + Integer.toOctalString((Integer) unix.get("mode") & 07777) + " owner " + unix.get("uid") + ":" + unix.get("gid");
    }

    public static String sha256(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file, LinkOption.NOFOLLOW_LINKS)) {
            MessageDigest digest = MessageDigest.getInstance("SHA-256");
            byte[] buffer = new byte[1 << 16];
            for (int n; (n = in.read(buffer)) > 0; ) {
                digest.update(buffer, 0, n);
            }
            return HexFormat.of().formatHex(digest.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** The entries directly in {@code dir}, by name; none when it is not there. */
    public static java.util.List<String> list(Path dir) throws IOException {
        if (!Files.isDirectory(dir)) {
            return java.util.List.of();
        }
        try (var entries = Files.list(dir)) {
            return entries.map(path -> path.getFileName().toString()).sorted().toList();
        }
    }
}
