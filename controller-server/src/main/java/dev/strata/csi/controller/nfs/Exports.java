package dev.strata.csi.controller.nfs;

import dev.strata.csi.backend.nfs.NfsMounter;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountPoint;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.rpc.CsiException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

/**
 * How controller-server reaches an export: at {@code <export-root>/<server>/<share>}. Whatever is
 * mounted there is taken as the export (mounted by a person, by the pod spec, or by this class);
 * when nothing is and on-demand mounting is on, the export is mounted there with mount.nfs and
 * stays mounted for the next call. A directory that is not a mount point is never written: it would
 * be the controller's own disk, and volumes made there would vanish with the pod.
 */
public final class Exports {

    private final Path root;
    private final boolean mountOnDemand;
    private final NfsMounter mounter;
    private final Log log;
    private final MountSource mounts;
    private final NfsExportMetrics metrics;
    private final Kernel kernel;
    private final ConcurrentMap<Path, Object> mounting = new ConcurrentHashMap<>();

    /** Where the mount table comes from: the kernel, or a test that describes the exports' filesystems. */
    interface MountSource {
        MountTable read() throws MountException;
    }

    public Exports(Path root, boolean mountOnDemand, NfsMounter mounter, NfsExportMetrics metrics, Kernel kernel, Log log) {
        this(root, mountOnDemand, mounter, metrics, kernel, log, MountTable::read);
    }

    Exports(Path root, boolean mountOnDemand, NfsMounter mounter, NfsExportMetrics metrics, Kernel kernel, Log log, MountSource mounts) {
        this.metrics = metrics;
        this.kernel = kernel;
        this.root = root.toAbsolutePath().normalize();
        this.mountOnDemand = mountOnDemand;
        this.mounter = mounter;
        this.log = log;
        this.mounts = mounts;
    }

    /** The export, mounted now if needed (with the StorageClass's mount options). */
    Export open(NfsVolume export, List<String> mountFlags) throws IOException, MountException {
        Path dir = pathOf(export);
        Optional<MountPoint> mounted = mounts.read().at(dir);
        if (mounted.isPresent()) {
            return new Export(export, dir, mounted.get(), kernel);
        }
        if (!mountOnDemand) {
            throw CsiException.failedPrecondition("export " + export.source() + " is not mounted at " + dir
                    + " on controller-server; mount it there, or run with --nfs-mount-exports=true");
        }
        synchronized (mounting.computeIfAbsent(dir, d -> new Object())) {
            mounted = mounts.read().at(dir);
            if (mounted.isEmpty()) {
                Files.createDirectories(dir);
                try {
                    mounter.mount(export, dir, mountFlags);
                } catch (MountException e) {
                    metrics.mountFailed(export);
                    throw CsiException.unavailable("cannot mount export " + export.source() + " on controller-server: " + e.getMessage());
                }
                mounted = mounts.read().at(dir);
                if (mounted.isEmpty()) {
                    throw CsiException.internal("mount of " + export.source() + " at " + dir + " succeeded but nothing is mounted there");
                }
                log.info("mounted export", "export", export.source(), "path", dir);
            }
            return new Export(export, dir, mounted.get(), kernel);
        }
    }

    NfsExportMetrics metrics() {
        return metrics;
    }

    /** The exports mounted under the export root now, for the calls that name no export (ListVolumes, unpublishing a static volume). */
    List<Export> mounted() throws MountException {
        List<Export> exports = new ArrayList<>();
        for (MountPoint mount : mounts.read().under(root)) {
            Path relative = root.relativize(mount.mountPoint());
            if (relative.getNameCount() < 1 || relative.toString().isEmpty()) {
                continue;
            }
            String server = relative.getName(0).toString();
            String share = "/" + (relative.getNameCount() > 1 ? relative.subpath(1, relative.getNameCount()).toString() : "");
            try {
                NfsVolume export = new NfsVolume(server, share.length() > 1 && share.endsWith("/") ? share.substring(0, share.length() - 1) : share, "");
                exports.add(new Export(export, mount.mountPoint(), mount, kernel));
            } catch (CsiException e) {
                // a mount below the root that does not follow the layout: not an export of ours
            }
        }
        return exports;
    }

    private Path pathOf(NfsVolume export) {
        Path dir = root.resolve(export.server());
        return export.share().equals("/") ? dir : dir.resolve(export.share().substring(1));
    }
}
