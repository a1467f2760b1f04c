package dev.strata.csi.controller.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.auth.AgentToken;
import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
import dev.strata.csi.controller.ControllerServer;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.system.TransientLock;
import dev.strata.csi.testing.BoundExport;
import dev.strata.csi.testing.FileTrees;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.Sockets;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.IntFunction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two controller-server replicas, two processes, on one export (a real directory bind-mounted where
 * both look for it, standing in for an NFS mount shared by two hosts): publishing one RWX volume to
 * many nodes through both at once records every node, and unpublishing through both at once forgets
 * every node, since each record is changed under its lock (Export#lockRecord). A call that cannot
 * get the lock within half its deadline answers ABORTED.
 */
@Tag("root")
class NfsReplicasTest {

    static final String SERVER = "nfs.example";
    static final String SHARE = "/srv/share";
    static final int NODES_PER_REPLICA = 40;

    @TempDir
    static Path dir;

    static Path exportData;
    static Path exportMount;
    static final List<ServerProcess> servers = new ArrayList<>();
    static final List<ManagedChannel> channels = new ArrayList<>();
    static final List<Integer> registryPorts = new ArrayList<>();
    static Path token;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        BoundExport export = BoundExport.bind(dir, SERVER, SHARE);
        exportData = export.data();
        exportMount = export.mount();
        Path exportRoot = export.root();
        token = Files.writeString(dir.resolve("token"), "nfs-replicas-test-token-0123456789");
        for (String replica : List.of("one", "two")) {
            Path socket = dir.resolve(replica + ".sock");
            int port;
            try (ServerSocket free = new ServerSocket(0)) {
                port = free.getLocalPort();
            }
            servers.add(ServerProcess.start(ControllerServer.class, "--endpoint", "unix://" + socket,
                    "--agent-token-file", token.toString(), "--agent-registry-address", "127.0.0.1:" + port,
                    "--agent-plaintext", "true", "--agent-settle-time", "0s", "--nfs-timeout", "4s",
                    "--nfs-export-root", exportRoot.toString(), "--nfs-mount-exports", "false").awaitListening(socket));
            channels.add(Sockets.channel(socket));
            registryPorts.add(port);
        }
        for (int i = 0; i < NODES_PER_REPLICA; i++) {
            register(0, "node-one-" + i);
            register(1, "node-two-" + i);
        }
        register(0, "node-a");
        register(1, "node-a");
    }

    /** A node agent's registration, which ControllerPublishVolume asks for (the agent itself is never called for NFS). */
    private static void register(int replica, String nodeId) throws Exception {
        ManagedChannel tcp = NettyChannelBuilder.forAddress("127.0.0.1", registryPorts.get(replica)).usePlaintext().build();
        try {
            AgentRegistryGrpc.newBlockingStub(tcp).withCallCredentials(AgentToken.fromFile(token).credentials())
                    .register(RegisterRequest.newBuilder().setNodeId(nodeId).setAddress("127.0.0.1:1").build());
        } finally {
            tcp.shutdownNow();
        }
    }

    @AfterAll
    static void stop() throws Exception {
        channels.forEach(ManagedChannel::shutdownNow);
        servers.forEach(ServerProcess::close);
        if (exportMount != null) {
            Programs.execute("umount", exportMount.toString());
        }
    }

    @Test
    void publishesAndUnpublishesThroughBothReplicasAtOnceAreAllRecorded() throws Exception {
        String volumeId = create("pvc-rwx");
        Set<String> nodes = new TreeSet<>();
        for (int i = 0; i < NODES_PER_REPLICA; i++) {
            nodes.add("node-one-" + i);
            nodes.add("node-two-" + i);
        }

        bothAtOnce(replica -> {
            for (int i = 0; i < NODES_PER_REPLICA; i++) {
                controller(replica).controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder().setVolumeId(volumeId)
                        .setNodeId("node-" + (replica == 0 ? "one" : "two") + "-" + i).setVolumeCapability(capability()).build());
            }
        });
        assertEquals(nodes, new TreeSet<>(record("pvc-rwx").getPublishedNodeIdsList()), "every node, none lost");

        bothAtOnce(replica -> {
            for (int i = 0; i < NODES_PER_REPLICA; i++) {
                controller(replica).controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder().setVolumeId(volumeId)
                        .setNodeId("node-" + (replica == 0 ? "one" : "two") + "-" + i).build());
            }
        });
        assertEquals(List.of(), record("pvc-rwx").getPublishedNodeIdsList(), "every node forgotten, none brought back");
        assertEquals(List.of(), FileTrees.list(exportData.resolve(".strata-csi/volumes")).stream()
                .filter(name -> name.endsWith(".lock")).toList(), "no lock file left");
    }

    /** Another replica (here the test) holds the record's lock: a publish waits 2 s (half of --nfs-timeout), then ABORTED. */
    @Test
    void aRecordLockedLongerThanTheWaitIsAborted() throws Exception {
        String volumeId = create("pvc-busy");
        Path lock = exportData.resolve(".strata-csi/volumes/" + VolumeRecords.key("pvc-busy") + ".lock");
        ControllerPublishVolumeRequest publish = ControllerPublishVolumeRequest.newBuilder().setVolumeId(volumeId)
                .setNodeId("node-a").setVolumeCapability(capability()).build();
        try (TransientLock held = TransientLock.tryAcquire(new Kernel(), lock).orElseThrow()) {
            long before = System.nanoTime();
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> controller(0).controllerPublishVolume(publish));
            assertEquals(Status.Code.ABORTED, e.getStatus().getCode(), e.getStatus().toString());
            assertTrue(e.getStatus().getDescription().contains("being changed by another call"), e.getStatus().getDescription());
            assertTrue(System.nanoTime() - before >= Duration.ofSeconds(2).toNanos(), "waited for the lock first");
        }
        assertEquals(List.of(), record("pvc-busy").getPublishedNodeIdsList());

        TransientLock held = TransientLock.tryAcquire(new Kernel(), lock).orElseThrow();
        Thread.ofPlatform().start(() -> {
            try {
                Thread.sleep(500);
                held.close();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        controller(1).controllerPublishVolume(publish); // a lock let go within the wait is taken
        assertEquals(List.of("node-a"), record("pvc-busy").getPublishedNodeIdsList());
        assertFalse(Files.exists(lock));
    }

    /**
     * A CreateVolume that copies a clone's content while a DeleteVolume of the same volume comes
     * through the other replica (a late retry of a create the provisioner saw succeed, the claim
     * deleted since): the copy is not renamed into place, since no record accounts for it any more.
     * Before, it was placed as a directory of no volume, and the create answered OK.
     */
    @Test
    void aCloneDeletedWhileItIsCopiedIsNeverPlaced() throws Exception {
        String origin = create("pvc-origin");
        byte[] data = new byte[16 * 1024];
        for (int i = 0; i < 1000; i++) {
            Files.write(exportData.resolve("pvc-origin").resolve("file-" + i), data);
        }
        CreateVolumeRequest clone = CreateVolumeRequest.newBuilder().setName("pvc-late")
                .putParameters("server", SERVER).putParameters("share", SHARE).addVolumeCapabilities(capability())
                .setVolumeContentSource(VolumeContentSource.newBuilder()
                        .setVolume(VolumeContentSource.VolumeSource.newBuilder().setVolumeId(origin)))
                .build();
        String id = createRetried(clone);
        delete(0, id);

        Path partial = exportData.resolve(".strata-csi/restoring/" + VolumeRecords.key("pvc-late"));
        ExecutorService thread = Executors.newSingleThreadExecutor();
        try {
            Future<?> late = thread.submit(() -> controller(0).createVolume(clone));
            long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
            while (!Files.exists(partial) && !late.isDone() && System.nanoTime() < deadline) {
                Thread.sleep(2);
            }
            assertTrue(Files.exists(partial), "the late create is copying");
            try {
                delete(1, id);
            } catch (StatusRuntimeException e) { // the record is gone; the copy's own lock keeps its partial copy from this call
                assertEquals(Status.Code.ABORTED, e.getStatus().getCode(), e.getStatus().toString());
            }
            assertTrue(new VolumeRecords(exportData.resolve(".strata-csi/volumes")).read("pvc-late").isEmpty());
            java.util.concurrent.ExecutionException failed = assertThrows(java.util.concurrent.ExecutionException.class, late::get);
            Status refused = ((StatusRuntimeException) failed.getCause()).getStatus();
            // UNAVAILABLE when the copy outlasts --nfs-timeout (4 s here): the copy goes on, and is judged once done.
            assertTrue(refused.getCode() == Status.Code.UNAVAILABLE
                    || refused.getCode() == Status.Code.ABORTED && refused.getDescription().contains("was deleted while this call made it"),
                    refused.toString());
        } finally {
            thread.shutdownNow();
        }
        Path copyLock = exportData.resolve(".strata-csi/restoring/" + VolumeRecords.key("pvc-late") + ".lock");
        long copying = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (Files.exists(copyLock) && System.nanoTime() < copying) {
            Thread.sleep(50);
        }
        assertFalse(Files.exists(exportData.resolve("pvc-late")), "no directory without a record");
        assertFalse(Files.exists(partial), "nor the copy");
        delete(1, id);
        delete(0, origin);
        assertEquals(List.of(), FileTrees.list(exportData).stream().filter(name -> !name.startsWith(".strata-csi")).toList());
    }

    /** As external-provisioner retries: a copy that outlasts --nfs-timeout goes on, and the retry finds it placed. */
    private static String createRetried(CreateVolumeRequest request) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (true) {
            try {
                return controller(0).createVolume(request).getVolume().getVolumeId();
            } catch (StatusRuntimeException e) {
                Status.Code code = e.getStatus().getCode();
                if ((code != Status.Code.UNAVAILABLE && code != Status.Code.ABORTED) || System.nanoTime() > deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }

    private static void delete(int replica, String volumeId) {
        controller(replica).deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volumeId).build());
    }

    private static String create(String name) {
        return controller(0).createVolume(CreateVolumeRequest.newBuilder().setName(name)
                .putParameters("server", SERVER).putParameters("share", SHARE).addVolumeCapabilities(capability()).build())
                .getVolume().getVolumeId();
    }

    private interface Calls {
        void run(int replica) throws Exception;
    }

    /** The calls of replica 0 and of replica 1, on two threads started together. */
    private static void bothAtOnce(Calls calls) throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            IntFunction<Future<?>> start = replica -> threads.submit(() -> {
                calls.run(replica);
                return null;
            });
            List<Future<?>> running = List.of(start.apply(0), start.apply(1));
            for (Future<?> call : running) {
                call.get();
            }
        } finally {
            threads.shutdownNow();
        }
    }

    private static NfsVolumeRecord record(String subDir) throws Exception {
        return new VolumeRecords(exportData.resolve(".strata-csi/volumes")).read(subDir).orElseThrow();
    }

    private static ControllerGrpc.ControllerBlockingStub controller(int replica) {
        return ControllerGrpc.newBlockingStub(channels.get(replica)).withDeadlineAfter(java.time.Duration.ofSeconds(60));
    }

    private static VolumeCapability capability() {
        return VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER))
                .build();
    }
}
