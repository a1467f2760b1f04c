package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.EncryptedVolumes.code;
import static dev.strata.csi.e2e.EncryptedVolumes.mappings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerExpandVolumeRequest;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.NodeExpandVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.deploy.CrashPoints;
import dev.strata.csi.e2e.EncryptedVolumes.Staged;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestVolumeGroup;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Encryption at rest in the LVM pool, and passphrase rotation, with real processes, lvm2,
 * cryptsetup and dm-crypt: encrypted thin and linear logical volumes through every phase, their
 * devices free of the plaintext written into them, a thin snapshot cut before a rotation restored
 * onto the other node's LVM pool (refused with the new passphrase alone, naming the previous one,
 * opened and rotated with both), a rotation while the volume is published and written (the old
 * passphrase then opens nothing, the new one does, the data is intact), and node-server killed at
 * each step of a rotation. Two node-servers, each with a volume group of its own on a loop device
 * and no image pool. Needs device-mapper with dm-crypt and thin provisioning: hack/luks-vm.sh runs
 * it in a VM with STRATA_TEST_LUKS=required; elsewhere it is skipped.
 */
@Tag("root")
class EncryptedLvmTest {

    private static final long MIB = 1L << 20;
    private static final String KEY = "k3y-" + Long.toHexString(new Random().nextLong());
    private static final String NEW_KEY = "n3w-" + Long.toHexString(new Random().nextLong());
    private static final Map<String, String> SECRETS = Map.of("passphrase", KEY);
    private static final Map<String, String> ROTATING = Map.of("passphrase", NEW_KEY, "previousPassphrase", KEY);
    private static final Map<String, String> THIN = Map.of("pool", "lvm", "encryption", "luks2");
    private static final Map<String, String> LINEAR = Map.of("pool", "lvm", "lvType", "linear", "encryption", "luks2");
    private static final VolumeCapability EXT4 = PipelineTest.mount("ext4");

    @TempDir
    static Path dir;

    private static final Map<String, TestVolumeGroup> groups = new HashMap<>();
    private static Cluster cluster;

    @BeforeAll
    static void start() throws Exception {
        EncryptedVolumes.requireDmCrypt();
        cluster = Cluster.start(dir.resolve("cluster"), List.of("--agent-plaintext", "true"), List.of("--agent-call-timeout", "300s"),
                Map.of());
        for (String node : List.of("node-a", "node-b")) {
            groups.put(node, TestVolumeGroup.make(dir, "strata-luks-" + node.substring(5) + "-" + ProcessHandle.current().pid(), "1G", "512m"));
            cluster.startNode(node, launch(node));
        }
    }

    private static Cluster.Launch launch(String node) {
        return Cluster.Launch.HOST.with(Map.of("VOLUME_GROUP", groups.get(node).name(), "THIN_POOL", TestVolumeGroup.THIN_POOL,
                "IMAGE_POOL", "false"));
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
            assertEquals(List.of(), SystemState.cleanUp(dir.resolve("cluster")));
        }
        for (TestVolumeGroup group : groups.values()) {
            assertEquals(List.of(), group.driverVolumes(), "logical volumes left behind in " + group.name());
            group.close();
        }
    }

    /** A volume of 64 MiB, or of its source's size (96 MiB: the volume the test grows before its snapshot). */
    private static Volume create(String name, String node, Map<String, String> parameters, VolumeContentSource source) {
        var request = CreateVolumeRequest.newBuilder().setName(name).putAllParameters(parameters).addVolumeCapabilities(EXT4)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(source == null ? 64 * MIB : 96 * MIB))
                .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(PipelineTest.on(node))
                        .addRequisite(PipelineTest.on(node)));
        if (source != null) {
            request.setVolumeContentSource(source);
        }
        return cluster.controller().createVolume(request.build()).getVolume();
    }

    /** Whether {@code passphrase} opens a key slot of the header on {@code device}: cryptsetup itself, not the driver. */
    private static boolean opens(Path device, String passphrase) throws Exception {
        Path keyFile = Files.createTempFile(dir, "key", "");
        Files.writeString(keyFile, passphrase);
        try {
            int status = Programs.execute("cryptsetup", "open", "--test-passphrase", "--key-file=" + keyFile, device.toString()).status();
            assertTrue(status == 0 || status == 2, "cryptsetup open --test-passphrase " + device + ": exit " + status);
            return status == 0;
        } finally {
            Files.delete(keyFile);
        }
    }

    /** Whether the block device holds {@code marker}, read through in 1 MiB pieces that overlap by the marker's length. */
    private static boolean deviceHolds(Path device, byte[] marker) throws Exception {
        byte[] buffer = new byte[(int) MIB + marker.length];
        int kept = 0;
        try (InputStream in = Files.newInputStream(device)) {
            int read;
            while ((read = in.readNBytes(buffer, kept, buffer.length - kept)) > 0) {
                int end = kept + read;
                for (int i = 0; i + marker.length <= end; i++) {
                    if (java.util.Arrays.equals(buffer, i, i + marker.length, marker, 0, marker.length)) {
                        return true;
                    }
                }
                kept = Math.min(marker.length - 1, end);
                System.arraycopy(buffer, end - kept, buffer, 0, kept);
            }
        }
        return false;
    }

    @Test
    void encryptedLogicalVolumesThroughEveryPhaseRotatedInUseAndASnapshotRestoredOnTheOtherNode() throws Exception {
        long started = System.nanoTime();
        Staged a = Staged.attach(cluster, "node-a", create("pvc-lvm-enc", "node-a", THIN, null), EXT4);
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> a.stage(Map.of())), "no key: refused, nothing formatted");
        assertEquals(2, Programs.execute("blkid", "-p", a.device().toString()).status(), "still blank: blkid finds nothing");
        a.stage(SECRETS);
        a.stage(SECRETS); // idempotent: the mapping over the logical volume's dm-N is the volume's
        assertTrue(SystemState.mountAt(a.staging()).orElseThrow().source().startsWith("/dev/dm-"), "staged from the mapping");
        a.publish();
        String marker = "STRATA-LVM-PLAINTEXT-" + Long.toHexString(new Random().nextLong());
        byte[] markerBytes = marker.getBytes(StandardCharsets.US_ASCII);
        Files.writeString(a.target().resolve("marker.txt"), (marker + "\n").repeat(1000));
        String checksum = VolumeData.write(a.target().resolve("data"), 4 * MIB);
        SystemState.run("sync", "-f", a.target().toString());
        assertFalse(deviceHolds(a.device(), markerBytes), "the logical volume " + a.device() + " holds the plaintext marker");
        assertTrue(opens(a.device(), KEY));

        long before = Files.getFileStore(a.target()).getTotalSpace();
        cluster.controller().controllerExpandVolume(ControllerExpandVolumeRequest.newBuilder().setVolumeId(a.volume().getVolumeId())
                .setVolumeCapability(EXT4).setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(96 * MIB)).build());
        cluster.node("node-a").node().nodeExpandVolume(NodeExpandVolumeRequest.newBuilder().setVolumeId(a.volume().getVolumeId())
                .setVolumePath(a.target().toString()).setStagingTargetPath(a.staging().toString()).setVolumeCapability(EXT4)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(96 * MIB)).putAllSecrets(SECRETS).build());
        long after = Files.getFileStore(a.target()).getTotalSpace();
        assertTrue(after >= before + 24 * MIB, "the filesystem on the mapping over the logical volume grew: " + before + " -> " + after);

        var snapshot = cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder().setName("snap-lvm-enc")
                .setSourceVolumeId(a.volume().getVolumeId()).build()).getSnapshot();

        // The rotation, with the volume published and written to all the while: 64 KiB blocks over the first 8 MiB of a file, synced.
        AtomicBoolean writing = new AtomicBoolean(true);
        var writes = new java.util.concurrent.atomic.AtomicLong();
        Thread writer = new Thread(() -> {
            try (var out = new java.io.RandomAccessFile(a.target().resolve("during-rotation").toFile(), "rw")) {
                byte[] block = new byte[64 * 1024];
                while (writing.get()) {
                    long n = writes.getAndIncrement();
                    java.util.Arrays.fill(block, (byte) n);
                    out.seek((n % 128) * block.length);
                    out.write(block);
                    out.getFD().sync();
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        writer.start();
        long rotationStarted = System.nanoTime();
        a.stage(ROTATING);
        double rotationSeconds = (System.nanoTime() - rotationStarted) / 1e9;
        writing.set(false);
        writer.join();
        SystemState.run("sync", "-f", a.target().toString());
        assertFalse(opens(a.device(), KEY), "after the rotation the old passphrase opens nothing");
        assertTrue(opens(a.device(), NEW_KEY), "the new one opens the volume");
        assertEquals(checksum, VolumeData.read(a.target().resolve("data")), "the data, intact through the rotation");
        long written = writes.get();
        assertTrue(written > 1, "the volume was written during the rotation: " + written + " blocks");
        byte[] last = Files.readAllBytes(a.target().resolve("during-rotation"));
        assertEquals((byte) (written - 1), last[(int) (((written - 1) % 128) * 64 * 1024)], "the last block written during the rotation");
        String logs = cluster.logs();
        assertTrue(logs.contains("accepts=current") || logs.contains("\"accepts\":\"current\""), "the log line says it accepts the current passphrase");

        // A thin snapshot cut before the rotation, restored onto node-b: its header is the old one.
        VolumeContentSource fromSnapshot = VolumeContentSource.newBuilder()
                .setSnapshot(VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId())).build();
        assertEquals(Status.Code.INVALID_ARGUMENT, code(() -> create("pvc-plain-copy", "node-a", Map.of("pool", "lvm"), fromSnapshot)),
                "a plain StorageClass cannot restore an encrypted snapshot");
        Staged b = Staged.attach(cluster, "node-b", create("pvc-lvm-enc-restored", "node-b", THIN, fromSnapshot), EXT4);
        StatusRuntimeException onlyNew = assertThrows(StatusRuntimeException.class, () -> b.stage(Map.of("passphrase", NEW_KEY)));
        assertEquals(Status.Code.PERMISSION_DENIED, onlyNew.getStatus().getCode());
        assertTrue(onlyNew.getStatus().getDescription().contains("previousPassphrase"), onlyNew.getStatus().getDescription());
        b.stage(ROTATING);
        b.publish();
        assertEquals(checksum, VolumeData.read(b.target().resolve("data")), "the data at snapshot time, read back on node-b");
        assertTrue(Files.readString(b.target().resolve("marker.txt")).startsWith(marker));
        assertFalse(opens(b.device(), KEY), "the restored volume was rotated at its stage");
        assertTrue(opens(b.device(), NEW_KEY));
        SystemState.run("sync", "-f", b.target().toString());
        assertFalse(deviceHolds(b.device(), markerBytes), "the restored logical volume holds the plaintext marker");

        // A linear encrypted volume: formatted once, the plaintext never on the device.
        Staged linear = Staged.attach(cluster, "node-b", create("pvc-lvm-enc-linear", "node-b", LINEAR, null), EXT4);
        linear.stage(SECRETS);
        linear.publish();
        Files.writeString(linear.target().resolve("marker.txt"), (marker + "\n").repeat(1000));
        SystemState.run("sync", "-f", linear.target().toString());
        assertFalse(deviceHolds(linear.device(), markerBytes), "the linear logical volume holds the plaintext marker");
        assertEquals(Status.Code.PERMISSION_DENIED, code(() -> linear.stage(Map.of("passphrase", "not-the-key", "previousPassphrase",
                "nor-this"))), "a rotation with two wrong keys");
        assertTrue(opens(linear.device(), KEY), "and nothing changed");
        assertFalse(cluster.logs().contains(KEY) || cluster.logs().contains(NEW_KEY), "a passphrase reached a log");

        for (Staged s : List.of(a, b, linear)) {
            s.unstage();
            assertEquals(List.of(), mappings(s.name()), "unstage closed the mapping of " + s.name());
        }
        a.stage(Map.of("passphrase", NEW_KEY));
        a.publish();
        assertEquals(checksum, VolumeData.read(a.target().resolve("data")), "staged again with the new passphrase alone");
        a.unstage();
        for (Staged s : List.of(a, b, linear)) {
            s.detachDelete();
        }
        cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
        System.out.printf("EncryptedLvmTest: thin and linear LUKS2 logical volumes through every phase, a rotation in use (%.1f s), "
                + "a snapshot restored on node-b, no plaintext on 3 logical volumes, %.0f s%n", rotationSeconds,
                (System.nanoTime() - started) / 1e9);
    }

    /**
     * node-server killed at each step of a rotation (as a host process: the volume stays mounted and
     * open); after the restart one of the two passphrases opens the volume, and the next stage with
     * the secret finishes the rotation with the data intact.
     */
    @Test
    void aCrashAtEachRotationStepLeavesAVolumeOnePassphraseOpensAndTheNextStageFinishes() throws Exception {
        for (CrashPoint point : Stream.of(CrashPoint.values()).filter(CrashPoints::rotation).toList()) {
            String name = "pvc-" + point.name().toLowerCase().replace('_', '-');
            cluster.restartNode("node-a", launch("node-a").with(Crashes.ENVIRONMENT, point.name()));
            Staged s = Staged.attach(cluster, "node-a", create(name, "node-a", THIN, null), EXT4);
            s.stage(SECRETS);
            s.publish();
            String checksum = VolumeData.write(s.target().resolve("data"), MIB);
            SystemState.run("sync", "-f", s.target().toString());
            assertThrows(StatusRuntimeException.class, () -> s.stage(ROTATING), point + ": the call cut by the crash");
            var process = cluster.node("node-a").process();
            for (int i = 0; i < 200 && process.isAlive(); i++) {
                Thread.sleep(50);
            }
            assertEquals(Crashes.EXIT_STATUS, process.exitCode(), point + ": node-server's exit status\n" + process.output());
            assertTrue(process.output().contains("crash point " + point + " reached"), point + "\n" + process.output());
            boolean oldOpens = opens(s.device(), KEY);
            boolean newOpens = opens(s.device(), NEW_KEY);
            assertTrue(oldOpens || newOpens, point + ": neither passphrase opens the volume");
            assertTrue(newOpens, point + ": the new passphrase was added before the crash");
            assertEquals(point == CrashPoint.ROTATE_ENCRYPTION_KEY_ADDED, oldOpens, point + ": the old passphrase opens it");
            cluster.startNode("node-a", launch("node-a"));
            s.stage(ROTATING);
            assertFalse(opens(s.device(), KEY), point + ": the next stage finished the rotation");
            assertTrue(opens(s.device(), NEW_KEY));
            assertEquals(checksum, VolumeData.read(s.target().resolve("data")), point + ": the data after the crash");
            s.unstage();
            s.detachDelete();
            System.out.println("EncryptedLvmTest: crash at " + point + " recovered, old passphrase opened after it: " + oldOpens);
        }
        cluster.restartNode("node-a", launch("node-a"));
    }
}
