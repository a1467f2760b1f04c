package dev.strata.csi.node.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.VolumeCapability.AccessMode;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.nfs.NfsMounter;
import dev.strata.csi.backend.nfs.NfsVolume;
import dev.strata.csi.backend.nfs.NfsVolumeId;
import dev.strata.csi.backend.nfs.OnDelete;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.node.mount.Mounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.testing.FakeCommands;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * NfsNodeBackend's decisions on a mount table that holds NFS mounts. This kernel has no NFS client, so
 * the table is a FAKE: {@link FakeMounts} keeps mountinfo lines as the kernel would write them for
 * a share and its binds. Target paths are real directories under a temporary directory.
 */
class NfsNodeBackendTest {

    static final NfsVolume VOLUME = new NfsVolume("10.0.0.5", "/exports", "pvc-1");
    static final NfsNodeBackend.Share SHARE = share(VOLUME);

    @TempDir
    Path dir;

    final FakeMounts mounts = new FakeMounts();
    final Log log = new Log(new PrintStream(new ByteArrayOutputStream(), true), 0);

    NfsNodeBackend volumes() {
        FakeCommands tools = mounts.tools();
        return new NfsNodeBackend(mounts, new NfsMounter(tools, Duration.ofSeconds(5), log), new NfsProbe(tools, Duration.ofSeconds(5)), log);
    }

    /** VOLUME staged (the FAKE share mounted) and published multi-writer at {@code target}. */
    NfsNodeBackend published(Path staging, Path target) throws Exception {
        mounts.share(Files.createDirectories(staging), VOLUME.source());
        NfsNodeBackend volumes = volumes();
        volumes.publish(SHARE, staging, target, capability(AccessMode.Mode.MULTI_NODE_MULTI_WRITER), noContext(), false);
        return volumes;
    }

    static NfsNodeBackend.Share share(NfsVolume volume) {
        return new NfsNodeBackend.Share(new NfsVolumeId(volume, OnDelete.DELETE).toString(), Optional.of(volume));
    }

    static Map<String, String> noContext() {
        return Map.of();
    }

    static VolumeCapability capability(AccessMode.Mode mode) {
        return VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                .setAccessMode(AccessMode.newBuilder().setMode(mode)).build();
    }

    @Test
    void aSingleWriterVolumeIsPublishedAtOneTargetOnly() throws Exception {
        Path staging = Files.createDirectories(dir.resolve("staging"));
        Path first = dir.resolve("pod-1");
        Path second = dir.resolve("pod-2");
        mounts.share(staging, VOLUME.source());
        NfsNodeBackend volumes = volumes();
        VolumeCapability single = capability(AccessMode.Mode.SINGLE_NODE_SINGLE_WRITER);
        volumes.publish(SHARE, staging, first, single, noContext(), false);
        volumes.publish(SHARE, staging, first, single, noContext(), false); // the same call again: nothing to do
        CsiException e = assertThrows(CsiException.class, () -> volumes.publish(SHARE, staging, second, single, noContext(), false));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
        assertTrue(e.getMessage().contains(first.toString()), e.getMessage());
        assertFalse(mounts.table().isMountPoint(second), "a refused publish mounts nothing");
        assertFalse(Files.exists(second), "a refused publish makes no target path");

        // Multi-writer modes share the volume between targets.
        volumes.publish(SHARE, staging, second, capability(AccessMode.Mode.SINGLE_NODE_MULTI_WRITER), noContext(), false);
        assertTrue(mounts.table().isMountPoint(second));
    }

    @Test
    void anotherShareOfTheSameServerDoesNotCountAsAPublish() throws Exception {
        Path staging = Files.createDirectories(dir.resolve("staging"));
        Path otherStaging = Files.createDirectories(dir.resolve("other-staging"));
        mounts.share(staging, VOLUME.source());
        // The kernel gives mounts of one server's export one device and lists each one's root as "/".
        mounts.shareOnSameDevice(otherStaging, "10.0.0.5:/exports/pvc-2", staging);
        mounts.shareOnSameDevice(Files.createDirectories(dir.resolve("export")), "10.0.0.5:/exports", staging);
        NfsNodeBackend volumes = volumes();
        volumes.publish(share(new NfsVolume("10.0.0.5", "/exports", "pvc-2")), otherStaging, dir.resolve("pod-2"),
                capability(AccessMode.Mode.SINGLE_NODE_SINGLE_WRITER), noContext(), false);
        volumes.publish(SHARE, staging, dir.resolve("pod-1"), capability(AccessMode.Mode.SINGLE_NODE_SINGLE_WRITER), noContext(), false);
        assertTrue(mounts.table().isMountPoint(dir.resolve("pod-1")));
        volumes.unpublish(SHARE, dir.resolve("pod-1"));
        volumes.unstage(SHARE, staging); // pvc-2's bind and the whole export's mount are not binds of pvc-1
        assertFalse(mounts.table().isMountPoint(staging));
    }

    @Test
    void unstageWaitsUntilNoPodHasTheShareMounted() throws Exception {
        Path staging = dir.resolve("staging");
        Path target = dir.resolve("pod-1");
        NfsNodeBackend volumes = published(staging, target);
        CsiException e = assertThrows(CsiException.class, () -> volumes.unstage(SHARE, staging));
        assertEquals(Status.Code.FAILED_PRECONDITION, e.code());
        assertTrue(mounts.table().isMountPoint(staging), "the share stays while a pod's bind of it is mounted");

        volumes.unpublish(SHARE, target);
        assertFalse(Files.exists(target));
        volumes.unstage(SHARE, staging);
        assertFalse(mounts.table().isMountPoint(staging));
    }

    @Test
    void anotherVolumesIdTakesNothingOff() throws Exception {
        Path staging = dir.resolve("staging");
        Path target = dir.resolve("pod-1");
        NfsNodeBackend volumes = published(staging, target);
        NfsNodeBackend.Share other = share(new NfsVolume("10.0.0.5", "/exports", "pvc-2"));
        CsiException unpublish = assertThrows(CsiException.class, () -> volumes.unpublish(other, target));
        CsiException unstage = assertThrows(CsiException.class, () -> volumes.unstage(other, staging));
        assertEquals(List.of(Status.Code.FAILED_PRECONDITION, Status.Code.FAILED_PRECONDITION), List.of(unpublish.code(), unstage.code()));
        assertTrue(unpublish.getMessage().contains("which is not volume " + other.volumeId()), unpublish.getMessage());
        assertTrue(mounts.table().isMountPoint(target) && mounts.table().isMountPoint(staging), "pvc-1's mounts stay");
    }

    @Test
    void aServerThatDoesNotAnswerIsAnAbnormalConditionAndUnavailable() throws Exception {
        Path staging = dir.resolve("staging");
        Path target = dir.resolve("pod-1");
        NfsNodeBackend volumes = published(staging, target);
        mounts.health = "hung";
        var stats = volumes.stats(SHARE, target);
        assertTrue(stats.getVolumeCondition().getAbnormal());
        assertEquals("NFS server 10.0.0.5 not responding", stats.getVolumeCondition().getMessage());
        assertEquals(0, stats.getUsageCount());
        CsiException e = assertThrows(CsiException.class, () -> volumes.stage(SHARE, staging,
                capability(AccessMode.Mode.MULTI_NODE_MULTI_WRITER), noContext()));
        assertEquals(Status.Code.UNAVAILABLE, e.code());
        assertEquals("NFS server 10.0.0.5 not responding", e.getMessage());

        // Unpublish and unstage go by the mount table and umount(8) alone: no stat of the dead share.
        // A static volume's id names no share: its NFS mounts at the paths are its own.
        int stats0 = mounts.stats;
        NfsNodeBackend.Share staticVolume = new NfsNodeBackend.Share("static-pv", Optional.empty());
        volumes.unpublish(staticVolume, target);
        volumes.unstage(staticVolume, staging);
        assertEquals(stats0, mounts.stats, "no stat of a path on the share while undoing");
        assertFalse(mounts.table().isMountPoint(target) || mounts.table().isMountPoint(staging));
        assertFalse(Files.exists(target));
    }

    @Test
    void aStaleShareIsReportedAndMountedAfreshByTheNextStageAndPublish() throws Exception {
        Path staging = dir.resolve("staging");
        Path target = dir.resolve("pod-1");
        NfsNodeBackend volumes = published(staging, target);
        VolumeCapability capability = capability(AccessMode.Mode.MULTI_NODE_MULTI_WRITER);
        var old = mounts.table().at(target).orElseThrow().device();
        mounts.health = "stale";
        var stats = volumes.stats(SHARE, target);
        assertTrue(stats.getVolumeCondition().getAbnormal());
        assertTrue(stats.getVolumeCondition().getMessage().contains("stale"), stats.getVolumeCondition().getMessage());

        volumes.stage(SHARE, staging, capability, noContext());
        var fresh = mounts.table().at(staging).orElseThrow().device();
        assertFalse(fresh.equals(old), "stage mounted the share afresh");
        mounts.staleDevices.add(old.toString());
        mounts.health = "";
        volumes.publish(SHARE, staging, target, capability, noContext(), false);
        assertEquals(fresh, mounts.table().at(target).orElseThrow().device(), "publish bound the fresh share");
        assertEquals(2, mounts.table().all().stream().filter(m -> m.fsType().equals("nfs4")).count(), "the stale mounts are gone");
        assertFalse(volumes.stats(SHARE, target).getVolumeCondition().getAbnormal());
    }

    /**
     * FAKE mount table and mounter: a share is listed as the kernel lists an NFSv4 mount, a bind of
     * it with the share's device and root; umount(8), run through {@link FakeCommands}, takes the
     * top mount at the path off.
     */
    static final class FakeMounts implements Mounter {

        private final List<String> lines = new ArrayList<>(List.of("1 0 8:1 / / rw - ext4 /dev/sda1 rw"));
        private int nextId = 100;
        private int nextDevice = 50;

        void share(Path at, String source) {
            lines.add(line(nextId++, "0:" + nextDevice++, "/", at, source));
        }

        void shareOnSameDevice(Path at, String source, Path of) {
            lines.add(line(nextId++, table().at(of).orElseThrow().device().toString(), "/", at, source));
        }

        private static String line(int id, String device, String root, Path at, String source) {
            return id + " 1 " + device + " " + root + " " + at + " rw,relatime - nfs4 " + source + " rw,vers=4.2,hard";
        }

        /** How the FAKE server answers stat: "" (it answers), "hung" (stat is killed at its deadline) or "stale" (ESTALE). */
        String health = "";
        /** Devices of shares the FAKE server no longer knows, whatever {@link #health} says. */
        final List<String> staleDevices = new ArrayList<>();
        int stats;

        /** FAKE mount(8), umount(8), stat(1) and chmod(1), acting on this table. */
        FakeCommands tools() {
            return new FakeCommands(argv -> {
                Path path = Path.of(argv.getLast());
                switch (argv.getFirst()) {
                    case "mount" -> share(path, argv.get(argv.size() - 2));
                    case "umount" -> unmount(path);
                    case "stat", "chmod" -> {
                        stats++;
                        String device = table().at(path).map(m -> m.device().toString()).orElse("");
                        if (health.equals("hung")) {
                            throw CommandException.timedOut(argv.getFirst() + " did not finish within 5000 ms; killed it");
                        }
                        if (health.equals("stale") || staleDevices.contains(device)) {
                            return new CommandResult(1, "", "stat: cannot statx '" + path + "': Stale file handle\n");
                        }
                        return new CommandResult(0, argv.contains("--file-system") ? "4096 100 50 40 1000 900\n" : "directory\n", "");
                    }
                    default -> throw new AssertionError("unexpected command " + argv);
                }
                return new CommandResult(0, "", "");
            });
        }

        @Override
        public void mount(String source, Path target, String fsType, List<String> options) {
            throw new AssertionError("NfsNodeBackend mounts shares with NfsMounter");
        }

        @Override
        public void bindMount(Path source, Path target, boolean readOnly) {
            var share = table().at(source).orElseThrow();
            lines.add(line(nextId++, share.device().toString(), share.root(), target, share.source()));
        }

        @Override
        public void unmount(Path target) {
            table().at(target).ifPresent(top -> lines.removeIf(l -> l.startsWith(top.id() + " ")));
        }

        @Override
        public MountTable table() {
            return MountTable.parse(String.join("\n", lines));
        }
    }
}
