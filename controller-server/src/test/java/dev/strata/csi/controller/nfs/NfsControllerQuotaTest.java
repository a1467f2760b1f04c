package dev.strata.csi.controller.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.nfs.NfsParameters;
import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.ServerProcess;
import io.grpc.Status;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import jnr.constants.platform.Errno;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What NfsController does with project quotas, against an export directory described as xfs or
 * ext4 mounted with project quotas (this kernel may have no quota support at all; the system calls
 * themselves are tested in SystemProjectQuotasTest and, where the kernel has quotas, end to end
 * in node-server's NfsQuotaTest). The quota calls go to {@link InMemoryProjectQuotas}, which can fail.
 */
class NfsControllerQuotaTest {

    static final long MIB = 1L << 20;
    static final long FIRST = VolumeQuotas.FIRST_ID;

    @TempDir
    Path root;
    Path export;
    volatile String mountinfo;
    final InMemoryProjectQuotas quotas = new InMemoryProjectQuotas();
    final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    NfsController controller;

    @BeforeEach
    void start() throws Exception {
        export = Files.createDirectories(root.resolve("nfs.example/srv/share"));
        mounted("xfs", "rw,attr2,inode64,prjquota");
        Log log = new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0);
        Exports exports = new Exports(root, false, null, new NfsExportMetrics(new PrometheusRegistry()), new Kernel(), log,
                () -> MountTable.parse(mountinfo));
        controller = new NfsController(exports, quotas, Duration.ofSeconds(30),
                Clock.fixed(Instant.parse("2026-01-02T03:04:05Z"), ZoneOffset.UTC), Crashes.none(), log);
    }

    /** What the controller finds mounted at the export: a filesystem of {@code type} with these super options. */
    void mounted(String type, String superOptions) {
        mountinfo = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
                + "40 22 7:3 / " + export + " rw,relatime shared:30 - " + type + " /dev/loop3 " + superOptions + "\n";
    }

    @Test
    void aVolumeWithCapacityGetsAProjectIdAndALimit() throws Exception {
        Volume volume = create("pvc-a", 16 * MIB);
        assertEquals("true", volume.getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        assertEquals(Map.of(export.resolve("pvc-a"), FIRST), quotas.projects);
        assertEquals(Map.of(FIRST, 16 * MIB), quotas.limits);
        assertEquals(FIRST, projectIdOf("pvc-a"), "the record keeps the id");

        Volume second = create("pvc-b", 32 * MIB);
        assertEquals("true", second.getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        assertEquals(FIRST + 1, projectIdOf("pvc-b"));
        assertEquals(Map.of(FIRST, 16 * MIB, FIRST + 1, 32 * MIB), quotas.limits);
    }

    @Test
    void aRepeatedCreateIsTheSameVolumeWithTheSameId() throws Exception {
        Volume volume = create("pvc-a", 16 * MIB);
        assertEquals(volume, create("pvc-a", 16 * MIB));
        assertEquals(volume, create("pvc-a", 16 * MIB));
        assertEquals(FIRST, projectIdOf("pvc-a"));
        assertEquals(Map.of(FIRST, 16 * MIB), quotas.limits, "no second id was handed out");
        assertEquals(FIRST + 1, projectIdOf(create("pvc-b", MIB)), "the next volume gets the next id");
    }

    @Test
    void withoutCapacityOrWithoutProjectQuotasNothingIsEnforced() throws Exception {
        assertEquals("false", create("pvc-nocap", 0).getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        mounted("xfs", "rw,attr2,inode64,noquota");
        assertEquals("false", create("pvc-noquota", 16 * MIB).getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        mounted("nfs4", "rw,vers=4.1,rsize=1048576");
        assertEquals("false", create("pvc-nfs", 16 * MIB).getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        mounted("ext4", "rw,usrquota");
        assertEquals("false", create("pvc-usrquota", 16 * MIB).getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        assertEquals(List.of(), quotas.calls, "no quota call where there are no project quotas");
        assertEquals(0, projectIdOf("pvc-noquota"));

        mounted("ext4", "rw,relatime,prjquota");
        assertEquals("true", create("pvc-ext4", 16 * MIB).getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        mounted("xfs", "rw,pquota");
        assertEquals("true", create("pvc-pquota", 16 * MIB).getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        assertEquals("false", create("pvc-noquota", 16 * MIB).getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED),
                "a volume made without a limit stays without one");
    }

    @Test
    void idsTheFilesystemAlreadyUsesAreSkipped() throws Exception {
        quotas.usedElsewhere.addAll(Set.of(FIRST, FIRST + 1, FIRST + 3));
        assertEquals(FIRST + 2, projectIdOf(create("pvc-a", MIB)));
        assertEquals(FIRST + 4, projectIdOf(create("pvc-b", MIB)));
    }

    @Test
    void concurrentCreatesGetIdsOfTheirOwn() throws Exception {
        List<Future<Volume>> made = new ArrayList<>();
        try (var threads = Executors.newFixedThreadPool(8)) {
            for (int i = 0; i < 16; i++) {
                String name = "pvc-" + i;
                made.add(threads.submit(() -> create(name, MIB)));
            }
        }
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            made.get(i).get();
            ids.add(projectIdOf("pvc-" + i));
        }
        assertEquals(16, Set.copyOf(ids).size(), "distinct ids: " + ids);
    }

    /**
     * Two controller-server replicas are two processes: they take turns through the lock file in
     * the export, so their volumes get ids of their own, and one name created by both at once is
     * one volume with one id.
     */
    @Test
    void twoControllerProcessesOnOneExportGiveIdsOfTheirOwn() throws Exception {
        int count = 25;
        Path go = root.resolve("go");
        List<ServerProcess> replicas = new ArrayList<>();
        try {
            for (String prefix : List.of("one", "two")) {
                replicas.add(ServerProcess.start(ControllerReplica.class, root.toString(), export.toString(), prefix,
                        String.valueOf(count), go.toString()));
            }
            for (ServerProcess replica : replicas) {
                replica.awaitOutput("ready");
            }
            Files.createFile(go);
            for (ServerProcess replica : replicas) {
                assertEquals(0, replica.exitCode(), replica.output());
            }
        } finally {
            replicas.forEach(ServerProcess::close);
        }
        List<NfsVolumeRecord> records = new VolumeRecords(export.resolve(".strata-csi/volumes"))
                .all(new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0));
        assertEquals(2 * count + 1, records.size(), "one record per volume, pvc-shared once");
        Set<Integer> ids = new java.util.HashSet<>();
        records.forEach(record -> ids.add(record.getProjectId()));
        assertEquals(2 * count + 1, ids.size(), "every volume has an id of its own: " + records);
        assertTrue(Files.isRegularFile(export.resolve(".strata-csi/" + VolumeQuotas.LOCK_FILE)));
    }

    @Test
    void aCreateCutShortAfterItsRecordIsCompletedByTheRetry() throws Exception {
        quotas.failLimit = Errno.EIO;
        CsiException e = assertThrows(CsiException.class, () -> create("pvc-a", 16 * MIB));
        assertEquals(Status.Code.INTERNAL, e.code());
        assertTrue(e.getMessage().contains("project quota id " + FIRST) && e.getMessage().contains("EIO"), e.getMessage());
        assertEquals(FIRST, projectIdOf("pvc-a"), "the record holds the id before the limit is set");
        assertEquals(Map.of(), quotas.limits);

        Volume volume = create("pvc-a", 16 * MIB);
        assertEquals("true", volume.getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        assertEquals(Map.of(FIRST, 16 * MIB), quotas.limits, "the retry set the limit on the same id");
        assertEquals(FIRST, quotas.projects.get(export.resolve("pvc-a")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"ESRCH", "ENOSYS", "EOPNOTSUPP", "ENOTTY"})
    void quotasTheKernelDoesNotEnforceAreAFailedPrecondition(String errno) throws Exception {
        quotas.failAssign = Errno.valueOf(errno);
        CsiException e = assertThrows(CsiException.class, () -> create("pvc-a", 16 * MIB));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
        assertTrue(e.getMessage().contains("does not enforce them"), e.getMessage());
        assertEquals(Map.of(), quotas.limits);
        assertEquals("true", create("pvc-a", 16 * MIB).getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
    }

    @Test
    void aLimitedVolumeOnAnExportThatLostItsQuotasIsNotPassedAsUnlimited() throws Exception {
        quotas.failLimit = Errno.EIO;
        assertThrows(CsiException.class, () -> create("pvc-a", 16 * MIB));
        mounted("xfs", "rw,noquota");
        CsiException e = assertThrows(CsiException.class, () -> create("pvc-a", 16 * MIB));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
        assertTrue(e.getMessage().contains("not mounted with project quotas"), e.getMessage());
    }

    @Test
    void deleteLiftsTheLimitBeforeTheDirectoryGoes() throws Exception {
        Volume volume = create("pvc-a", 16 * MIB);
        Files.writeString(export.resolve("pvc-a/file"), "data");
        quotas.onLimit = () -> assertTrue(Files.exists(export.resolve("pvc-a/file")), "the data is still there when the limit goes");
        delete(volume);
        quotas.onLimit = () -> {};
        assertEquals(Map.of(), quotas.limits);
        assertFalse(Files.exists(export.resolve("pvc-a")));
        delete(volume);
        assertEquals(FIRST, projectIdOf(create("pvc-b", MIB)), "a deleted volume's id, with no usage left, can be used again");
    }

    @Test
    void aLimitThatCannotBeLiftedFailsTheDeleteBeforeAnythingMoves() throws Exception {
        Volume volume = create("pvc-a", 16 * MIB);
        Files.writeString(export.resolve("pvc-a/file"), "data");
        quotas.failLimit = Errno.EIO;
        CsiException e = assertThrows(CsiException.class, () -> delete(volume));
        assertEquals(Status.Code.INTERNAL, e.code());
        assertEquals("data", Files.readString(export.resolve("pvc-a/file")));
        assertEquals(FIRST, projectIdOf("pvc-a"), "the record, and with it the id, stays for the retry");

        delete(volume);
        assertEquals(Map.of(), quotas.limits);
        assertFalse(Files.exists(export.resolve("pvc-a")));
    }

    @Test
    void whereQuotasAreOffNowTheDeleteGoesOnAndSaysTheLimitStays() throws Exception {
        Volume volume = create("pvc-a", 16 * MIB);
        quotas.failLimit = Errno.ESRCH;
        delete(volume);
        assertFalse(Files.exists(export.resolve("pvc-a")));
        assertTrue(logged.toString(StandardCharsets.UTF_8).contains("project quota limit left"), logged.toString(StandardCharsets.UTF_8));

        Volume other = create("pvc-b", 16 * MIB);
        mounted("nfs4", "rw,vers=4.1");
        delete(other);
        assertFalse(Files.exists(export.resolve("pvc-b")));
    }

    @ParameterizedTest
    @ValueSource(strings = {"archive", "retain"})
    void archivedAndRetainedDataKeepsNoLimit(String onDelete) throws Exception {
        Volume volume = create("pvc-kept", Map.of("onDelete", onDelete), 16 * MIB);
        Files.writeString(export.resolve("pvc-kept/file"), "kept");
        delete(volume);
        assertEquals(Map.of(), quotas.limits);
        Path kept = onDelete.equals("retain") ? export.resolve("pvc-kept") : export.resolve("archived-pvc-kept-20260102T030405Z");
        assertEquals("kept", Files.readString(kept.resolve("file")));
        quotas.usedElsewhere.add(FIRST); // the kept files still count for their project id
        assertEquals(FIRST + 1, projectIdOf(create("pvc-next", MIB)), "an id whose files are kept is not handed out again");
    }

    // --- helpers

    @Test
    void aRestoredOrClonedVolumeGetsItsOwnIdAndLimitAndMustHoldTheSourcesData() throws Exception {
        Volume source = create("pvc-source", 16 * MIB);
        Files.write(export.resolve("pvc-source/data"), new byte[3 * (int) MIB]);
        var snapshot = controller.createSnapshot(controller.byId(source.getVolumeId()).orElseThrow(), "snap", Map.of());
        assertEquals(16 * MIB, snapshot.getSizeBytes());
        assertEquals(Map.of(export.resolve("pvc-source"), FIRST), quotas.projects, "the snapshot's copy is not the volume's");

        var fromSnapshot = csi.v1.Csi.VolumeContentSource.newBuilder().setSnapshot(
                csi.v1.Csi.VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId())).build();
        var fromVolume = csi.v1.Csi.VolumeContentSource.newBuilder().setVolume(
                csi.v1.Csi.VolumeContentSource.VolumeSource.newBuilder().setVolumeId(source.getVolumeId())).build();
        for (var from : List.of(fromSnapshot, fromVolume)) {
            CsiException small = assertThrows(CsiException.class, () -> create("pvc-small", 2 * MIB, from));
            assertEquals(Status.Code.OUT_OF_RANGE, small.code(), small.getMessage());
            assertFalse(Files.exists(export.resolve("pvc-small")));
            assertEquals(java.util.Optional.empty(), new VolumeRecords(export.resolve(".strata-csi/volumes")).read("pvc-small"),
                    "a refused restore leaves no record");
        }

        Volume restored = create("pvc-restored", 4 * MIB, fromSnapshot);
        Volume cloned = create("pvc-cloned", 8 * MIB, fromVolume);
        assertEquals("true", restored.getVolumeContextMap().get(NfsParameters.CAPACITY_ENFORCED));
        assertEquals(FIRST + 1, projectIdOf(restored));
        assertEquals(FIRST + 2, projectIdOf(cloned));
        assertEquals(Map.of(FIRST, 16 * MIB, FIRST + 1, 4 * MIB, FIRST + 2, 8 * MIB), quotas.limits);
        assertEquals(FIRST + 1, quotas.projects.get(export.resolve("pvc-restored")), "the copied files are marked with the new id");
        assertEquals(3 * MIB, Files.size(export.resolve("pvc-cloned/data")));
    }

    Volume create(String name, long bytes) {
        return create(name, Map.of(), bytes);
    }

    Volume create(String name, Map<String, String> parameters, long bytes) {
        return create(name, parameters, bytes, csi.v1.Csi.VolumeContentSource.getDefaultInstance());
    }

    /** A volume made from {@code source} (none: the default instance). */
    Volume create(String name, long bytes, csi.v1.Csi.VolumeContentSource source) {
        return create(name, Map.of(), bytes, source);
    }

    Volume create(String name, Map<String, String> parameters, long bytes, csi.v1.Csi.VolumeContentSource source) {
        Map<String, String> all = new HashMap<>(Map.of("server", "nfs.example", "share", "/srv/share"));
        all.putAll(parameters);
        var request = CreateVolumeRequest.newBuilder().setName(name).putAllParameters(all)
                .addVolumeCapabilities(VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER)));
        if (bytes > 0) {
            request.getCapacityRangeBuilder().setRequiredBytes(bytes);
        }
        if (source.hasSnapshot() || source.hasVolume()) {
            request.setVolumeContentSource(source);
        }
        try {
            return controller.create(controller.check(request.build()));
        } catch (CsiException e) {
            throw e;
        } catch (Exception e) {
            throw new AssertionError(e);
        }
    }

    void delete(Volume volume) throws Exception {
        controller.delete(controller.byId(volume.getVolumeId()).orElseThrow());
    }

    long projectIdOf(Volume volume) throws Exception {
        return projectIdOf(volume.getVolumeContextMap().get("subDir"));
    }

    long projectIdOf(String subDir) throws Exception {
        return Integer.toUnsignedLong(new VolumeRecords(export.resolve(".strata-csi/volumes")).read(subDir).orElseThrow().getProjectId());
    }
}
