package dev.strata.csi.controller.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.ControllerGrpc;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.controller.ControllerServer;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.BoundExport;
import dev.strata.csi.testing.FileTrees;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.SortedMap;
import java.util.concurrent.Callable;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fault-injection suite of NFS snapshots, restores and clones: controller-server, as a process,
 * is killed at every {@link NfsCrashPoint} (armed with {@value Crashes#ENVIRONMENT}), started
 * again, and the call that was cut short is repeated as csi-snapshotter or external-provisioner
 * would; then the volume and its snapshot go through the rest of their life. Whatever the point: a
 * snapshot cut short is never listed, the restore shows the snapshot's content and the clone the
 * source's (every file compared), and after every delete the export holds nothing but the driver's
 * empty directories. The export is a real directory bind-mounted where the controller looks for it.
 */
@Tag("root")
class NfsCrashRecoveryTest {

    static final String SERVER = "nfs.example";
    static final String SHARE = "/srv/share";

    @TempDir
    static Path dir;

    static Path exportRoot;
    static Path exportData;
    static Path exportMount;
    static int kills;

    @BeforeAll
    static void mountExport() throws Exception {
        Root.require();
        BoundExport export = BoundExport.bind(dir, SERVER, SHARE);
        exportData = export.data();
        exportRoot = export.root();
        exportMount = export.mount();
    }

    @AfterAll
    static void unmountExport() throws Exception {
        Programs.execute("umount", exportMount.toString());
        System.out.printf("nfs crash suite: %d crash points, %d kills%n", NfsCrashPoint.values().length, kills);
    }

    @TestFactory
    Stream<DynamicTest> everyCrashPoint() {
        return Stream.of(NfsCrashPoint.values()).map(point -> DynamicTest.dynamicTest(point.name(), () -> new Scenario(point).run()));
    }

    /** One volume's life with controller-server armed at one point: it must die there once, and the retry completes. */
    static final class Scenario {

        private final NfsCrashPoint point;
        private final String prefix;
        private final Path socket;
        private ServerProcess server;
        private ManagedChannel channel;
        private boolean crashed;

        Scenario(NfsCrashPoint point) {
            this.point = point;
            this.prefix = point.name().toLowerCase().replace('_', '-');
            this.socket = dir.resolve(prefix + "/controller.sock");
        }

        void run() throws Exception {
            start(Map.of(Crashes.ENVIRONMENT, point.name()));
            try {
                String source = call(() -> controller().createVolume(request(prefix + "-source").build()).getVolume().getVolumeId());
                Path data = exportData.resolve(prefix + "-source");
                Files.write(data.resolve("file"), new byte[] {1, 2, 3});
                Files.write(Files.createDirectories(data.resolve("dir")).resolve("big"), random(3 << 20));
                Files.createSymbolicLink(data.resolve("link"), Path.of("dir/big"));
                SortedMap<String, String> atSnapshot = FileTrees.describe(data);

                Snapshot snapshot = call(() -> controller().createSnapshot(CreateSnapshotRequest.newBuilder()
                        .setName(prefix + "-snap").setSourceVolumeId(source).build()).getSnapshot());
                assertTrue(snapshot.getReadyToUse());
                Files.writeString(data.resolve("file"), "changed after the snapshot");
                SortedMap<String, String> current = FileTrees.describe(data);

                String restored = call(() -> controller().createVolume(request(prefix + "-restored")
                        .setVolumeContentSource(VolumeContentSource.newBuilder().setSnapshot(
                                VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId()))).build())
                        .getVolume().getVolumeId());
                assertEquals(atSnapshot, FileTrees.describe(exportData.resolve(prefix + "-restored")), "restored after " + point);
                String clone = call(() -> controller().createVolume(request(prefix + "-clone")
                        .setVolumeContentSource(VolumeContentSource.newBuilder().setVolume(
                                VolumeContentSource.VolumeSource.newBuilder().setVolumeId(source))).build())
                        .getVolume().getVolumeId());
                assertEquals(current, FileTrees.describe(exportData.resolve(prefix + "-clone")), "cloned after " + point);

                call(() -> controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build()));
                assertEquals(List.of(), listed());
                for (String volume : List.of(source, restored, clone)) {
                    call(() -> controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume).build()));
                }
                assertTrue(crashed, "controller-server never reached " + point);
                for (String part : List.of("snapshots", "restoring", "trash")) {
                    assertEquals(List.of(), FileTrees.list(exportData.resolve(".strata-csi").resolve(part)), part + " after " + point);
                }
                assertEquals(List.of(), FileTrees.list(exportData).stream().filter(name -> name.startsWith(prefix)).toList(),
                        "every volume's directory is gone");
            } finally {
                stop();
            }
        }

        /**
         * The call; if the server died at the armed point on the way, it is started again unarmed,
         * a cut-short snapshot is checked not to be listed, and the call is repeated.
         */
        private <T> T call(Callable<T> call) throws Exception {
            try {
                return call.call();
            } catch (StatusRuntimeException e) {
                for (int i = 0; i < 500 && server.isAlive(); i++) {
                    Thread.sleep(20); // the connection closes as the process halts; its exit follows
                }
                if (crashed || server.isAlive()) {
                    throw new AssertionError(e.getStatus() + "; controller-server's output:\n" + server.output(), e);
                }
                assertEquals(Crashes.EXIT_STATUS, server.exitCode(), server.output());
                assertTrue(server.output().contains("crash point " + point + " reached"), server.output());
                crashed = true;
                kills++;
                stop();
                // What an NFS client leaves for a lock file removed while open (.nfs and hex digits):
                // not a partial copy, so the start leaves it to the client that removes it.
                Path stray = Files.createDirectories(exportData.resolve(".strata-csi/restoring")).resolve(".nfs000000000001b2c300000001");
                Files.writeString(stray, "");
                start(Map.of());
                server.awaitOutput("partial NFS copies removed");
                assertTrue(Files.exists(stray), "the start removed " + stray + ", which is no partial copy");
                Files.delete(stray);
                if (point.name().endsWith("_COPIED")) {
                    assertTrue(server.output().contains("removed a partial copy a crash left"), server.output());
                }
                Path area = exportData.resolve(".strata-csi");
                assertEquals(List.of(), FileTrees.list(area.resolve("snapshots")).stream().filter(name -> name.endsWith(".partial")).toList(),
                        "the start removed the partial snapshot");
                assertEquals(List.of(), FileTrees.list(area.resolve("restoring")).stream()
                        .filter(name -> Files.isDirectory(area.resolve("restoring").resolve(name))).toList(), "the start removed the partial restore");
                if (point.name().startsWith("SNAPSHOT_")) {
                    assertEquals(List.of(), listed(), "a snapshot cut short at " + point + " is not listed");
                }
                return call.call();
            }
        }

        private List<Snapshot> listed() {
            return controller().listSnapshots(ListSnapshotsRequest.getDefaultInstance()).getEntriesList().stream()
                    .map(entry -> entry.getSnapshot()).filter(s -> s.getSnapshotId().contains(prefix)).toList();
        }

        private ControllerGrpc.ControllerBlockingStub controller() {
            return ControllerGrpc.newBlockingStub(channel).withDeadlineAfter(java.time.Duration.ofSeconds(60));
        }

        private void start(Map<String, String> environment) throws Exception {
            Files.createDirectories(socket.getParent());
            Files.deleteIfExists(socket);
            Path token = Files.writeString(dir.resolve("token"), "nfs-crash-test-token-0123456789");
            int port;
            try (ServerSocket free = new ServerSocket(0)) {
                port = free.getLocalPort();
            }
            server = ServerProcess.start(ControllerServer.class, environment, "--endpoint", "unix://" + socket,
                    "--agent-token-file", token.toString(), "--agent-registry-address", "127.0.0.1:" + port,
                    "--agent-plaintext", "true", "--agent-settle-time", "0s",
                    "--nfs-export-root", exportRoot.toString(), "--nfs-mount-exports", "false").awaitListening(socket);
            channel = Sockets.channel(socket);
        }

        private void stop() {
            if (channel != null) {
                channel.shutdownNow();
            }
            if (server != null) {
                server.close();
            }
        }

        private static CreateVolumeRequest.Builder request(String name) {
            return CreateVolumeRequest.newBuilder().setName(name).putParameters("server", SERVER).putParameters("share", SHARE)
                    .addVolumeCapabilities(VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                            .setAccessMode(VolumeCapability.AccessMode.newBuilder()
                                    .setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER)));
        }

        private static byte[] random(int size) {
            byte[] bytes = new byte[size];
            new Random(size).nextBytes(bytes);
            return bytes;
        }
    }
}
