package dev.strata.csi.testing;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * An NFS export stood in for by a local directory, where the kernel has no NFS client: {@code data}
 * bind-mounted at {@code mount}, where controller-server (--nfs-export-root {@code root},
 * --nfs-mount-exports false) looks for the export {@code server:share}.
 */
public record BoundExport(Path data, Path root, Path mount) {

    /** Makes the directories under {@code dir} and the bind mount; the caller unmounts {@link #mount()}. */
    public static BoundExport bind(Path dir, String server, String share) throws Exception {
        Path data = Files.createDirectories(dir.resolve("export-data"));
        Path root = dir.resolve("exports");
        Path mount = Files.createDirectories(root.resolve(server + share));
        Programs.run("mount", "--bind", data.toString(), mount.toString());
        return new BoundExport(data, root, mount);
    }
}
