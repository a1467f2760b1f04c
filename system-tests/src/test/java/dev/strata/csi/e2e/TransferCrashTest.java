package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.ContentTransferTest.sha256;
import static dev.strata.csi.e2e.PipelineTest.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.node.local.CrashPoint;
import dev.strata.csi.system.Crashes;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.StatusRuntimeException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.io.TempDir;

/**
 * The fault-injection suite of copies across nodes: the sending or the receiving node-server is
 * killed at each transfer {@link CrashPoint} in the middle of a copy of 96 MiB of data, started
 * again, and the copy repeated as the retried CreateVolume repeats it. The retry resumes from what
 * the receiving node recorded on disk, never reports a partial image, and the new volume holds the
 * source's content byte for byte. Content that changed meanwhile starts over instead of resuming.
 */
@Tag("root")
class TransferCrashTest {

    private static final long SIZE = 128 * MIB;
    private static final long DATA = 96 * MIB;

    @TempDir
    static Path dir;

    private static Cluster cluster;
    private static Relays relays;
    private static Path source;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, "node-a", "node-b");
        relays = new Relays(cluster);
        source = source(cluster, SIZE, DATA, 1);
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir), "the suite left mounts or loop devices behind");
    }

    @TestFactory
    Stream<DynamicTest> everyTransferCrashPoint() {
        return Stream.of(CrashPoint.values()).filter(CrashPoint::transfer)
                .map(point -> DynamicTest.dynamicTest(point.name(), () -> crashAndRetry(point, false)));
    }

    /** The source written between the crash and the retry: the partial image holds other content, and starts over. */
    @Test
    void contentChangedBeforeTheRetryStartsOver() throws Exception {
        crashAndRetry(CrashPoint.TRANSFER_CHECKPOINTED, true);
    }

    private void crashAndRetry(CrashPoint point, boolean changeSource) throws Exception {
        String name = "pvc-" + point.name().toLowerCase().replace('_', '-') + (changeSource ? "-changed" : "");
        String crashing = point == CrashPoint.TRANSFER_SENT ? "node-a" : "node-b";
        cluster.restartNode(crashing, Cluster.Launch.HOST.with(Crashes.ENVIRONMENT, point.name()));

        AtomicLong first = new AtomicLong();
        StatusRuntimeException cut = assertThrows(StatusRuntimeException.class, () -> copy(name, first));
        var process = cluster.node(crashing).process();
        process.awaitOutput("crash point " + point + " reached");
        assertEquals(Crashes.EXIT_STATUS, process.exitCode(),
                crashing + " halted at " + point + " (the copy ended " + cut.getStatus() + "):\n" + cluster.logs());
        cluster.startNode(crashing);

        Path record = cluster.node("node-b").pool().resolve(name + ".record");
        String recorded = Files.readString(record);
        assertTrue(recorded.contains("state: RECEIVING"), "never READY before the end:\n" + recorded);
        long received = receivedBytes(recorded);
        assertTrue(received > 0 && received < DATA, "progress on disk, recorded: " + received + "\n" + recorded);
        if (changeSource) {
            write(source, 0, MIB, 2);
        }

        AtomicLong second = new AtomicLong();
        Volume image = copy(name, second);
        assertEquals(name, image.getName());
        assertTrue(Files.readString(record).contains("state: READY"));
        assertEquals(sha256(source), sha256(cluster.node("node-b").pool().resolve(name + ".img")), "byte for byte");
        if (changeSource) {
            assertEquals(DATA, second.get(), "other content: everything sent again");
        } else {
            assertTrue(second.get() <= DATA - received, "resumed at " + received + ": sent " + second.get());
        }
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("local/node-b/" + name).build());
        assertFalse(Files.exists(record));
    }

    private static Volume copy(String name, AtomicLong progress) throws Exception {
        return relays.copy("node-a", "pvc-source", "node-b", name, SIZE, progress);
    }

    private static long receivedBytes(String record) {
        var matcher = java.util.regex.Pattern.compile("received_bytes: (\\d+)").matcher(record);
        return matcher.find() ? Long.parseLong(matcher.group(1)) : 0;
    }

    /** The block volume pvc-source on node-a, of {@code size} bytes, its first {@code data} bytes written from {@code seed}: its image. */
    static Path source(Cluster cluster, long size, long data, int seed) throws Exception {
        cluster.controller().createVolume(CreateVolumeRequest.newBuilder()
                .setName("pvc-source")
                .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(size))
                .addVolumeCapabilities(PipelineTest.block())
                .setAccessibilityRequirements(TopologyRequirement.newBuilder().addRequisite(PipelineTest.on("node-a")))
                .build());
        Path image = cluster.node("node-a").pool().resolve("pvc-source.img");
        write(image, 0, data, seed);
        return image;
    }

    static void write(Path image, long offset, long length, int seed) throws Exception {
        Random random = new Random(seed);
        byte[] bytes = new byte[(int) MIB];
        try (FileChannel file = FileChannel.open(image, StandardOpenOption.WRITE)) {
            for (long at = offset; at < offset + length; at += MIB) {
                random.nextBytes(bytes);
                ByteBuffer buffer = ByteBuffer.wrap(bytes);
                while (buffer.hasRemaining()) {
                    file.write(buffer, at + buffer.position());
                }
            }
            file.force(true);
        }
    }
}
