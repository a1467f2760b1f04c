package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.Volume;
import dev.strata.csi.testing.QuotaFilesystems;
import dev.strata.csi.testing.QuotaFilesystems.Project;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * NFS volume capacity through controller-server as a process, on exports that are real loop-mounted
 * filesystems (pre-mounted where the controller looks for them, as on an NFS server running the
 * controller): xfs and ext4 mounted with project quotas get a project id and a limit that holds a
 * writer to the capacity; without project quotas nothing is enforced and the volume says so. The
 * effects are checked with lsattr, xfs_quota and dd. A kernel without quota support (as on these
 * build machines) cannot mount a filesystem with prjquota; there the quota tests are skipped and say so.
 */
@Tag("root")
class NfsQuotaTest {

    static final long MIB = 1L << 20;

    @TempDir
    static Path dir;
    static Path exportRoot;
    static Cluster cluster;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        exportRoot = Files.createDirectories(dir.resolve("exports"));
        cluster = Cluster.start(dir, List.of("--agent-plaintext", "true"),
                List.of("--nfs-export-root", exportRoot.toString(), "--nfs-mount-exports", "false"), Map.of());
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        SystemState.cleanUp(dir);
    }

    @Test
    void anExportWithoutProjectQuotasIsNotEnforced() throws Exception {
        Path export = export("xfs-plain.example", "xfs", false);
        Volume volume = create("xfs-plain.example", "pvc-plain", Map.of(), 16 * MIB);
        assertEquals("false", volume.getVolumeContextMap().get("capacityEnforced"));
        assertEquals(new Project(0, false), QuotaFilesystems.projectOf(export.resolve("pvc-plain")), "no project id was set");
        delete(volume);
        assertFalse(Files.exists(export.resolve("pvc-plain")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"xfs", "ext4"})
    void capacityIsEnforcedWithProjectQuotas(String type) throws Exception {
        String server = type + "-quota.example";
        Path export = export(server, type, true);
        Volume volume = create(server, "pvc-quota", Map.of(), 16 * MIB);
        assertEquals("true", volume.getVolumeContextMap().get("capacityEnforced"));
        Path data = export.resolve("pvc-quota");
        Project project = QuotaFilesystems.projectOf(data);
        assertTrue(project.inherits() && project.id() >= 1 << 20, "the directory passes on a project id of the driver's: " + project);
        assertEquals(16 * 1024, QuotaFilesystems.hardLimitKiB(export, project.id()), "the limit is the capacity in KiB");

        assertEquals(volume, create(server, "pvc-quota", Map.of(), 16 * MIB), "a repeated create is the same volume");
        assertEquals(project, QuotaFilesystems.projectOf(data), "with the same project id");
        Volume other = create(server, "pvc-other", Map.of(), 8 * MIB);
        long otherId = QuotaFilesystems.projectOf(export.resolve("pvc-other")).id();
        assertNotEquals(project.id(), otherId, "each volume has an id of its own");
        assertEquals(8 * 1024, QuotaFilesystems.hardLimitKiB(export, otherId));

        Files.createDirectories(data.resolve("app"));
        var written = QuotaFilesystems.writeAsPod(data.resolve("app/fill"), 32);
        assertNotEquals(0, written.status(), "dd wrote 32 MiB into a 16 MiB volume: " + written.output());
        assertTrue(written.output().contains(QuotaFilesystems.limitReached(type)), written.output());
        assertEquals(project.id(), QuotaFilesystems.projectOf(data.resolve("app/fill")).id(), "files made inside carry the id");

        delete(volume);
        assertFalse(Files.exists(data));
        assertEquals(0, QuotaFilesystems.hardLimitKiB(export, project.id()), "the limit went with the volume");
        delete(volume);

        Volume archived = create(server, "pvc-archive", Map.of("onDelete", "archive"), 8 * MIB);
        long archivedId = QuotaFilesystems.projectOf(export.resolve("pvc-archive")).id();
        Files.writeString(export.resolve("pvc-archive/file"), "kept");
        delete(archived);
        assertEquals(0, QuotaFilesystems.hardLimitKiB(export, archivedId), "archived data keeps no limit");
        try (Stream<Path> files = Files.list(export)) {
            assertEquals(1, files.filter(p -> p.getFileName().toString().startsWith("archived-pvc-archive-")).count());
        }
        delete(other);
    }

    /** A filesystem of {@code type} mounted where the controller looks for {@code server}:/srv/share. */
    static Path export(String server, String type, boolean projectQuotas) throws Exception {
        Path mountPoint = exportRoot.resolve(server + "/srv/share");
        QuotaFilesystems.mount(type, dir.resolve(server + ".img"), mountPoint, projectQuotas);
        return mountPoint;
    }

    static Volume create(String server, String name, Map<String, String> parameters, long bytes) {
        Map<String, String> all = new HashMap<>(Map.of("server", server, "share", "/srv/share"));
        all.putAll(parameters);
        CreateVolumeRequest request = NfsTest.request(name, all, bytes);
        return cluster.controller().createVolume(request).getVolume();
    }

    static void delete(Volume volume) {
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
    }
}
