package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.TopologyRequirement;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentData;
import dev.strata.csi.agent.api.ContentEnd;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.ContentStart;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.ReadContentRequest;
import dev.strata.csi.agent.api.ReceiveVolumeRequest;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.agent.api.WriteContentResponse;
import dev.strata.csi.controller.local.ContentRelay;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.CallCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A volume's content copied from one node's agent to another's through the relay controller-server
 * runs (ContentRelay), with two node-servers as processes: byte for byte, as sparse as the source,
 * into a larger volume, found complete when asked again, and damaged content refused with nothing
 * left behind. The test plays controller-server for the agent calls, with its token.
 */
@Tag("root")
class ContentTransferTest {

    @TempDir
    static Path dir;

    static Cluster cluster;
    static Relays relays;
    static CallCredentials token;
    static ManagedChannel channelA;
    static ManagedChannel channelB;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, "node-a", "node-b");
        relays = new Relays(cluster);
        token = relays.token();
        channelA = relays.channel("node-a");
        channelB = relays.channel("node-b");
    }

    @AfterAll
    static void stop() throws Exception {
        channelA.shutdownNow();
        channelB.shutdownNow();
        if (cluster != null) {
            cluster.close();
        }
    }

    @AfterEach
    void nothingLeftBehind() throws Exception {
        assertEquals(List.of(), SystemState.cleanUp(dir), "the test left mounts or loop devices behind");
    }

    @Test
    void aSparseVolumeArrivesOnAnotherNodeByteForByteAndAsSparse() throws Exception {
        Path source = volumeWithData("pvc-source", 256 * MIB, "node-a");
        Volume image = relay().copy(agent("node-a", channelA), image("pvc-source"), agent("node-b", channelB),
                Relays.receive("pvc-copy", image("pvc-source"), 256 * MIB, Allocation.SPARSE), new AtomicLong());
        assertEquals("pvc-copy", image.getName());
        assertEquals(256 * MIB, image.getCapacityBytes());
        Path copy = cluster.node("node-b").pool().resolve("pvc-copy.img");
        assertEquals(sha256(source), sha256(copy), "byte for byte");
        long allocated = allocatedBytes(copy);
        assertTrue(allocated >= 8 * MIB && allocated < 9 * MIB,
                "the copy holds the source's 8 MiB and a block of data, not its holes or its MiB of written zeros: " + allocated);
        assertTrue(allocatedBytes(source) >= 9 * MIB, "the source has its zeros allocated");
        assertTrue(Files.readString(cluster.node("node-b").pool().resolve("pvc-copy.record")).contains("state: READY"));

        // The new volume is node-b's, as CSI sees it; asked again, the copy is found complete.
        List<String> ids = cluster.controller().listVolumes(ListVolumesRequest.getDefaultInstance()).getEntriesList().stream()
                .map(entry -> entry.getVolume().getVolumeId()).toList();
        assertTrue(ids.contains("local/node-b/pvc-copy"), ids.toString());
        AtomicLong again = new AtomicLong();
        assertEquals(image.getName(), relay().copy(agent("node-a", channelA), image("pvc-source"), agent("node-b", channelB),
                Relays.receive("pvc-copy", image("pvc-source"), 256 * MIB, Allocation.SPARSE), again).getName());
        assertEquals(0, again.get(), "nothing sent twice");

        // Into a larger volume: the same content, zeros after it.
        relay().copy(agent("node-a", channelA), image("pvc-source"), agent("node-b", channelB),
                Relays.receive("pvc-larger", image("pvc-source"), 320 * MIB, Allocation.FULL), new AtomicLong());
        Path larger = cluster.node("node-b").pool().resolve("pvc-larger.img");
        assertEquals(320 * MIB, Files.size(larger));
        assertEquals(sha256(source, 320 * MIB), sha256(larger), "the source's content, then zeros");
        assertTrue(allocatedBytes(larger) >= 320 * MIB, "a fully allocated volume has every block");

        for (String name : List.of("pvc-copy", "pvc-larger")) {
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("local/node-b/" + name).build());
        }
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("local/node-a/pvc-source").build());
        assertEquals(List.of(), poolFiles("node-b", "pvc-"));
    }

    /** A volume with an ext4 filesystem and files, copied: node-b mounts it as it is, never formatted. */
    @Test
    void aFilesystemArrivesReadyToMountOnTheOtherNode() throws Exception {
        var capability = PipelineTest.mount("ext4");
        var source = cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                .setName("pvc-files").setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(64 * MIB))
                .addVolumeCapabilities(capability)
                .setAccessibilityRequirements(TopologyRequirement.newBuilder().addRequisite(PipelineTest.on("node-a"))).build()).getVolume();
        Path mounted = stage(source.getVolumeId(), "node-a", capability);
        byte[] data = new byte[(int) (3 * MIB)];
        new Random(7).nextBytes(data);
        Files.write(mounted.resolve("data"), data);
        SystemState.run("sync", "-f", mounted.toString());
        unstage(source.getVolumeId(), "node-a", mounted);

        relay().copy(agent("node-a", channelA), image("pvc-files"), agent("node-b", channelB),
                Relays.receive("pvc-files-copy", image("pvc-files"), 64 * MIB, Allocation.SPARSE), new AtomicLong());
        assertTrue(Files.readString(cluster.node("node-b").pool().resolve("pvc-files-copy.record")).contains("filesystem: \"ext4\""),
                "the copy's record names the source's filesystem: it is never formatted");
        Path copy = stage("local/node-b/pvc-files-copy", "node-b", capability);
        assertArrayEquals(data, Files.readAllBytes(copy.resolve("data")));
        unstage("local/node-b/pvc-files-copy", "node-b", copy);
        assertFalse(cluster.node("node-b").process().output().contains("made filesystem"), "node-b formatted nothing");
        for (String id : List.of("local/node-b/pvc-files-copy", source.getVolumeId())) {
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(id).build());
        }
    }

    /** Attached and staged at a staging path of {@code node}'s kubelet directory, as the sidecars and kubelet do it. */
    private static Path stage(String volumeId, String node, csi.v1.Csi.VolumeCapability capability) throws Exception {
        var context = cluster.controller().controllerPublishVolume(csi.v1.Csi.ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volumeId).setNodeId(node).setVolumeCapability(capability).build()).getPublishContextMap();
        Path staging = cluster.kubeletDir(node, "staging-" + volumeId.replace('/', '-'));
        cluster.node(node).node().nodeStageVolume(csi.v1.Csi.NodeStageVolumeRequest.newBuilder().setVolumeId(volumeId)
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).putAllPublishContext(context).build());
        return staging;
    }

    private static void unstage(String volumeId, String node, Path staging) {
        cluster.node(node).node().nodeUnstageVolume(csi.v1.Csi.NodeUnstageVolumeRequest.newBuilder().setVolumeId(volumeId)
                .setStagingTargetPath(staging.toString()).build());
        cluster.controller().controllerUnpublishVolume(csi.v1.Csi.ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(volumeId).setNodeId(node).build());
    }

    @Test
    void aDamagedChunkIsRefusedAndThePartialImageRemoved() throws Exception {
        byte[] data = new byte[4096];
        new Random(1).nextBytes(data);
        ContentChunk good = ContentChunk.newBuilder().setData(ContentData.newBuilder().setOffset(0)
                .setData(ByteString.copyFrom(data)).setCrc32C(crc32c(data))).build();
        data[17] ^= 1;
        ContentChunk damaged = ContentChunk.newBuilder().setData(good.getData().toBuilder().setData(ByteString.copyFrom(data))).build();

        StatusRuntimeException refused = assertThrows(StatusRuntimeException.class, () -> write("pvc-damaged", damaged, end(new byte[32])));
        assertEquals(Status.Code.DATA_LOSS, refused.getStatus().getCode(), refused.getStatus().toString());
        assertEquals(List.of(), poolFiles("node-b", "pvc-damaged"), "no partial image, no record");

        StatusRuntimeException digest = assertThrows(StatusRuntimeException.class, () -> write("pvc-digest", good, end(new byte[32])));
        assertEquals(Status.Code.DATA_LOSS, digest.getStatus().getCode(), digest.getStatus().toString());
        assertTrue(digest.getStatus().getDescription().contains("digest"), digest.getStatus().toString());
        assertEquals(List.of(), poolFiles("node-b", "pvc-digest"), "no partial image, no record");
        cluster.node("node-b").process().awaitOutput("content refused; partial volume removed");
    }

    @Test
    void anAttachedImageIsNotReadDirectly() throws Exception {
        volumeWithData("pvc-attached", 32 * MIB, "node-a");
        cluster.controller().controllerPublishVolume(csi.v1.Csi.ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId("local/node-a/pvc-attached").setNodeId("node-a").setVolumeCapability(PipelineTest.block()).build());
        var reading = NodeAgentGrpc.newBlockingStub(channelA).withCallCredentials(token).withDeadlineAfter(30, TimeUnit.SECONDS)
                .readContent(ReadContentRequest.newBuilder().setSource(image("pvc-attached")).build());
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, reading::hasNext);
        assertEquals(Status.Code.FAILED_PRECONDITION, e.getStatus().getCode(), e.getStatus().toString());
        cluster.controller().controllerUnpublishVolume(csi.v1.Csi.ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId("local/node-a/pvc-attached").setNodeId("node-a").build());
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("local/node-a/pvc-attached").build());
    }

    /** A WriteContent stream into a new RECEIVING image on node-b: its start, then {@code chunks}. */
    private static WriteContentResponse write(String name, ContentChunk... chunks) throws Exception {
        NodeAgentGrpc.newBlockingStub(channelB).withCallCredentials(token).withDeadlineAfter(30, TimeUnit.SECONDS)
                .receiveVolume(ReceiveVolumeRequest.newBuilder().setName(name).setCapacityBytes(8 * MIB).setAllocation(Allocation.SPARSE)
                        .setSource(image("pvc-elsewhere")).build());
        CompletableFuture<WriteContentResponse> result = new CompletableFuture<>();
        StreamObserver<WriteContentRequest> stream = Relays.writeContent(NodeAgentGrpc.newStub(channelB).withCallCredentials(token)
                .withDeadlineAfter(30, TimeUnit.SECONDS), result);
        stream.onNext(WriteContentRequest.newBuilder().setName(name).setChunk(ContentChunk.newBuilder()
                .setStart(ContentStart.newBuilder().setTag("test/" + name).setSizeBytes(8 * MIB))).build());
        for (ContentChunk chunk : chunks) {
            stream.onNext(WriteContentRequest.newBuilder().setName(name).setChunk(chunk).build());
        }
        stream.onCompleted();
        try {
            return result.get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            throw (Exception) e.getCause();
        }
    }

    private static ContentChunk end(byte[] digest) {
        return ContentChunk.newBuilder().setEnd(ContentEnd.newBuilder().setSha256(ByteString.copyFrom(digest))).build();
    }

    /**
     * A volume made through CSI on {@code node}, detached, its image written as a block device
     * would be: data at three places, a MiB of zeros written (allocated, but no content), holes
     * elsewhere.
     */
    static Path volumeWithData(String name, long size, String node) throws Exception {
        var volume = cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                .setName(name)
                .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(size))
                .addVolumeCapabilities(PipelineTest.block())
                .setAccessibilityRequirements(TopologyRequirement.newBuilder().addRequisite(PipelineTest.on(node)))
                .build()).getVolume();
        assertEquals("local/" + node + "/" + name, volume.getVolumeId());
        Path image = cluster.node(node).pool().resolve(name + ".img");
        Random random = new Random(name.hashCode());
        try (FileChannel file = FileChannel.open(image, StandardOpenOption.WRITE)) {
            writeAt(file, 0, random, 3 * MIB);
            writeAt(file, 8 * MIB, null, MIB);
            writeAt(file, Math.min(100 * MIB, size - 6 * MIB), random, 5 * MIB);
            writeAt(file, size - MIB + 3 * 4096, random, 4096);
            file.force(true);
        }
        return image;
    }

    private static void writeAt(FileChannel file, long offset, Random random, long length) throws Exception {
        byte[] bytes = new byte[(int) length];
        if (random != null) {
            random.nextBytes(bytes);
        }
        ByteBuffer buffer = ByteBuffer.wrap(bytes);
        while (buffer.hasRemaining()) {
            file.write(buffer, offset + buffer.position());
        }
    }

    static ContentRelay relay() {
        return Relays.relay();
    }

    static ContentRelay.Agent agent(String node, ManagedChannel channel) {
        return relays.agent(node, channel);
    }

    static ContentSource image(String name) {
        return ContentSource.newBuilder().setVolume(name).build();
    }

    /** The files of the node's pool whose names start with {@code prefix}. */
    static List<String> poolFiles(String node, String prefix) throws Exception {
        return poolFiles(cluster.node(node).pool(), prefix);
    }

    /** The files of {@code pool} whose names start with {@code prefix}. */
    static List<String> poolFiles(Path pool, String prefix) throws Exception {
        try (var files = Files.list(pool)) {
            return files.map(file -> file.getFileName().toString()).filter(file -> file.startsWith(prefix)).sorted().toList();
        }
    }

    static long allocatedBytes(Path file) throws Exception {
        return Long.parseLong(SystemState.run("stat", "--format=%b", file.toString()).trim()) * 512;
    }

    static String sha256(Path file) throws Exception {
        return sha256(file, Files.size(file));
    }

    /** SHA-256 of the file's first {@code length} bytes; zeros past its end. */
    static String sha256(Path file, long length) throws Exception {
        MessageDigest digest = MessageDigest.getInstance("SHA-256");
        byte[] buffer = new byte[1 << 20];
        long left = length;
        try (InputStream in = Files.newInputStream(file)) {
            while (left > 0) {
                int read = in.read(buffer, 0, (int) Math.min(buffer.length, left));
                if (read < 0) {
                    read = (int) Math.min(buffer.length, left);
                    java.util.Arrays.fill(buffer, 0, read, (byte) 0);
                }
                digest.update(buffer, 0, read);
                left -= read;
            }
        }
        return HexFormat.of().formatHex(digest.digest());
    }

    static int crc32c(byte[] data) {
        java.util.zip.CRC32C crc = new java.util.zip.CRC32C();
        crc.update(data);
        return (int) crc.getValue();
    }
}
