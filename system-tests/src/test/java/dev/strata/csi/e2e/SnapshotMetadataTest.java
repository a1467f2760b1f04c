package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.BlockMetadata;
import csi.v1.Csi.BlockMetadataType;
import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.GetMetadataAllocatedRequest;
import csi.v1.Csi.GetMetadataAllocatedResponse;
import csi.v1.Csi.GetMetadataDeltaRequest;
import csi.v1.Csi.GetMetadataDeltaResponse;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import dev.strata.csi.testing.LoopFilesystem;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Context;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The SnapshotMetadata service end to end, as external-snapshot-metadata calls it on the
 * controller's socket (the snapshot ids from the VolumeSnapshotContents, starting_offset and
 * max_results from the backup tool, the snapshotter secrets, a cancel when the tool goes away):
 * known 4 KiB blocks written through a published block volume on a real node-server (the first,
 * the last, a range across 64 KiB, one in the middle, a 1 MiB run), two snapshots, and the ranges
 * checked against the bytes of the snapshots' files on the node: every block that differs is in
 * the delta, every block written is allocated; paging by max_results and by starting_offset gives
 * the same union; the errors the spec names. node-a's pool is xfs (reflinks), node-b's the
 * machine's ext4 (sparse copies, compared by reading).
 */
@Tag("root")
class SnapshotMetadataTest {

    static final int BLOCK = 4096;
    static final long SIZE = 32 * MIB;

    @TempDir
    static Path dir;

    static Cluster cluster;
    static LoopFilesystem xfsPool;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        xfsPool = LoopFilesystem.mount(dir.resolve("xfs-pool.img"), 1L << 30, dir.resolve(SnapshotTest.REFLINK_NODE + "/pool"), "-m", "reflink=1");
        cluster = Cluster.start(dir, SnapshotTest.REFLINK_NODE, SnapshotTest.COPY_NODE);
        SnapshotTest.cluster = cluster;
        PipelineTest.cluster = cluster;
    }

    @AfterAll
    static void stop() throws Exception {
        SnapshotTest.cluster = null;
        PipelineTest.cluster = null;
        if (cluster != null) {
            cluster.close();
        }
        if (xfsPool != null) {
            xfsPool.close();
            // The kernel detaches the pool's loop device when its last user lets go, which a process
            // probing loop devices on this busy machine may delay past the unmount.
            for (int i = 0; i < 50 && !SystemState.loopDevicesOf(dir.resolve("xfs-pool.img")).isEmpty(); i++) {
                Thread.sleep(100);
            }
        }
        assertEquals(List.of(), SystemState.cleanUp(dir));
    }

    /** A range, for comparing what the service says with what was written. */
    record Range(long offset, long length) {
        long end() {
            return offset + length;
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {SnapshotTest.REFLINK_NODE, SnapshotTest.COPY_NODE})
    void theDeltaHoldsEveryChangedBlockAndPagingGivesTheSameUnion(String node) throws Exception {
        List<Range> changed = knownBlocksBetweenTwoSnapshots(cluster, node, Map.of(), BLOCK,
                (base, target) -> Optional.of(differingBlocks(cluster.node(node).pool().resolve("snapshots"), base, target)));
        System.out.printf("cbt: %s: delta %d ranges, %d bytes%n", node, changed.size(), changed.stream().mapToLong(Range::length).sum());
    }

    /** Where the two snapshots' bytes differ, when the test can read them. */
    interface Truth {
        Optional<List<Range>> differing(Snapshot base, Snapshot target) throws Exception;
    }

    /**
     * The pattern on {@code node} with a StorageClass of {@code parameters}, two snapshots and
     * another volume's: the delta covers every block written (and every block where the snapshots'
     * bytes differ, where {@code truth} can tell), nothing farther than {@code granularity} from
     * one; the allocated ranges cover both patterns; paging gives the same union; the errors; a
     * cancel. Everything is deleted after. Returns the delta.
     */
    static List<Range> knownBlocksBetweenTwoSnapshots(Cluster cluster, String node, Map<String, String> parameters, long granularity,
            Truth truth) throws Exception {
        SnapshotTest.cluster = cluster;
        Volume volume = create(cluster, "pvc-cbt-" + node, node, parameters);
        SnapshotTest.Published published = SnapshotTest.publish(node, volume, PipelineTest.block());
        List<Range> before = List.of(new Range(0, BLOCK), new Range(64 * 1024 - BLOCK, 3 * BLOCK), new Range(SIZE / 2, BLOCK),
                new Range(SIZE - BLOCK, BLOCK));
        List<Range> after = List.of(new Range(0, BLOCK), new Range(128 * 1024 - BLOCK, 2 * BLOCK), new Range(5 * MIB, MIB),
                new Range(SIZE / 2 + 7 * BLOCK, BLOCK), new Range(SIZE - BLOCK, BLOCK));
        write(published.target(), before, (byte) 1);
        Snapshot base = SnapshotTest.snapshot("snapshot-cbt-1-" + node, volume);
        write(published.target(), after, (byte) 2);
        Snapshot target = SnapshotTest.snapshot("snapshot-cbt-2-" + node, volume);
        Volume other = create(cluster, "pvc-cbt-other-" + node, node, parameters);
        Snapshot elsewhere = SnapshotTest.snapshot("snapshot-cbt-other-" + node, other);
        try {
            var service = cluster.snapshotMetadata();
            // As the sidecar sends it: the secrets of the VolumeSnapshotClass, if any, which this driver needs none of.
            List<GetMetadataDeltaResponse> responses = new ArrayList<>();
            service.getMetadataDelta(delta(base, target, 0, 0).putSecrets("key", "value").build()).forEachRemaining(responses::add);
            assertTrue(responses.stream().allMatch(r -> r.getBlockMetadataType() == BlockMetadataType.VARIABLE_LENGTH
                    && r.getVolumeCapacityBytes() == SIZE), "VARIABLE_LENGTH, the volume's size, in every message: " + responses);
            List<Range> changed = ranges(responses.stream().flatMap(r -> r.getBlockMetadataList().stream()).toList());
            assertCovers(changed, after);
            assertNear(changed, after, granularity);
            Optional<List<Range>> differing = truth.differing(base, target);
            if (differing.isPresent()) { // against the bytes: every 4 KiB block where the two snapshots differ is in the delta
                assertEquals(after.stream().mapToLong(Range::length).sum(), differing.get().stream().mapToLong(Range::length).sum(),
                        "the snapshots differ where the second pattern was written");
                assertCovers(changed, differing.get());
            }

            List<Range> allocated = ranges(allocatedResponses(cluster, target.getSnapshotId(), 0, 0).stream()
                    .flatMap(r -> r.getBlockMetadataList().stream()).toList());
            assertCovers(allocated, before);
            assertCovers(allocated, after);

            // Paging: one range per message gives the same union; so does resuming past the second range.
            List<GetMetadataDeltaResponse> paged = new ArrayList<>();
            service.getMetadataDelta(delta(base, target, 0, 1).build()).forEachRemaining(paged::add);
            assertTrue(paged.stream().allMatch(r -> r.getBlockMetadataCount() <= 1), "max_results 1");
            assertEquals(changed, ranges(paged.stream().flatMap(r -> r.getBlockMetadataList().stream()).toList()));
            long resume = changed.get(1).end();
            List<Range> rest = new ArrayList<>(changed.subList(0, 2));
            service.getMetadataDelta(delta(base, target, resume, 2).build()).forEachRemaining(r -> rest.addAll(ranges(r.getBlockMetadataList())));
            assertEquals(changed, rest);
            List<Range> allocatedPaged = new ArrayList<>();
            allocatedResponses(cluster, target.getSnapshotId(), 0, 1).forEach(r -> allocatedPaged.addAll(ranges(r.getBlockMetadataList())));
            assertEquals(allocated, allocatedPaged);

            // The errors.
            assertCode(Status.Code.NOT_FOUND, () -> allocatedResponses(cluster, snapshotId(node, "snapshot-never-taken"), 0, 0));
            assertCode(Status.Code.NOT_FOUND, () -> allocatedResponses(cluster, "not-an-id-of-this-driver", 0, 0));
            assertCode(Status.Code.INVALID_ARGUMENT, () -> allocatedResponses(cluster, "", 0, 0));
            assertCode(Status.Code.INVALID_ARGUMENT, () -> allocatedResponses(cluster, "nfs-snapshot/nfs.example/%2Fsrv%2Fshare/snap-1", 0, 0));
            assertCode(Status.Code.OUT_OF_RANGE, () -> allocatedResponses(cluster, target.getSnapshotId(), SIZE, 0));
            assertCode(Status.Code.INVALID_ARGUMENT, () -> allocatedResponses(cluster, target.getSnapshotId(), -1, 0));
            assertCode(Status.Code.INVALID_ARGUMENT, () -> allocatedResponses(cluster, target.getSnapshotId(), 0, -1));
            assertCode(Status.Code.INVALID_ARGUMENT, () -> deltaResponses(cluster, delta(target, base, 0, 0)), "base taken after the target");
            assertCode(Status.Code.INVALID_ARGUMENT, () -> deltaResponses(cluster, delta(elsewhere, target, 0, 0)),
                    "snapshots of different volumes");
            assertCode(Status.Code.OUT_OF_RANGE, () -> deltaResponses(cluster, delta(base, target, SIZE + BLOCK, 0)));
            assertCode(Status.Code.NOT_FOUND, () -> deltaResponses(cluster, GetMetadataDeltaRequest.newBuilder()
                    .setBaseSnapshotId(snapshotId(node, "snapshot-gone")).setTargetSnapshotId(target.getSnapshotId())));

            // A backup tool that goes away: its cancel reaches the node, which lets the snapshot go.
            Context.CancellableContext call = Context.current().withCancellation();
            Iterator<GetMetadataAllocatedResponse> stream = call.call(() -> service.getMetadataAllocated(
                    GetMetadataAllocatedRequest.newBuilder().setSnapshotId(target.getSnapshotId()).setMaxResults(1).build()));
            stream.next();
            call.cancel(null);
            return changed;
        } finally {
            SnapshotTest.delete(published);
            SnapshotTest.deleteVolume(other);
            for (Snapshot snapshot : List.of(base, target, elsewhere)) {
                SnapshotTest.deleteSnapshot(snapshot); // waits for no stream: a cancelled one has let go
            }
        }
    }

    private static Volume create(Cluster cluster, String name, String node, Map<String, String> parameters) {
        return cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName(name)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(SIZE)).addVolumeCapabilities(PipelineTest.block())
                .putAllParameters(parameters).setAccessibilityRequirements(TopologyRequirement.newBuilder()
                        .addPreferred(PipelineTest.on(node)).addRequisite(PipelineTest.on(node))).build()).getVolume();
    }

    private static GetMetadataDeltaRequest.Builder delta(Snapshot base, Snapshot target, long from, int max) {
        return GetMetadataDeltaRequest.newBuilder().setBaseSnapshotId(base.getSnapshotId()).setTargetSnapshotId(target.getSnapshotId())
                .setStartingOffset(from).setMaxResults(max);
    }

    private static List<GetMetadataAllocatedResponse> allocatedResponses(Cluster cluster, String id, long from, int max) {
        List<GetMetadataAllocatedResponse> responses = new ArrayList<>();
        cluster.snapshotMetadata().withDeadlineAfter(60, TimeUnit.SECONDS).getMetadataAllocated(GetMetadataAllocatedRequest.newBuilder()
                .setSnapshotId(id).setStartingOffset(from).setMaxResults(max).build()).forEachRemaining(responses::add);
        return responses;
    }

    private static List<GetMetadataDeltaResponse> deltaResponses(Cluster cluster, GetMetadataDeltaRequest.Builder request) {
        List<GetMetadataDeltaResponse> responses = new ArrayList<>();
        cluster.snapshotMetadata().withDeadlineAfter(60, TimeUnit.SECONDS).getMetadataDelta(request.build()).forEachRemaining(responses::add);
        return responses;
    }

    private static String snapshotId(String node, String name) {
        return "local-snapshot/" + node + "/" + name;
    }

    private static String name(Snapshot snapshot) {
        return snapshot.getSnapshotId().substring(snapshot.getSnapshotId().lastIndexOf('/') + 1);
    }

    private static void assertCode(Status.Code code, Runnable call) {
        assertCode(code, call, "");
    }

    private static void assertCode(Status.Code code, Runnable call, String why) {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, call::run, why);
        assertEquals(code, e.getStatus().getCode(), why + ": " + e.getStatus());
        assertTrue(e.getStatus().getDescription() != null && !e.getStatus().getDescription().contains("Exception"),
                "a message, not a stack trace: " + e.getStatus());
    }

    private static List<Range> ranges(List<BlockMetadata> metadata) {
        return metadata.stream().map(m -> new Range(m.getByteOffset(), m.getSizeBytes())).toList();
    }

    /** Every byte of {@code wanted} in one of {@code reported}, which ascend without overlap. */
    private static void assertCovers(List<Range> reported, List<Range> wanted) {
        for (int i = 1; i < reported.size(); i++) {
            assertTrue(reported.get(i - 1).end() <= reported.get(i).offset(), "ascending, not overlapping: " + reported);
        }
        for (Range range : wanted) {
            for (long at = range.offset(); at < range.end(); at += BLOCK) {
                long byteAt = at;
                assertTrue(reported.stream().anyMatch(r -> r.offset() <= byteAt && byteAt < r.end()), "block at " + at + " in " + reported);
            }
        }
    }

    /** Writes the pattern through the published block device, bypassing the page cache's delay: synced. */
    private static void write(Path device, List<Range> ranges, byte value) throws Exception {
        try (FileChannel channel = FileChannel.open(device, StandardOpenOption.WRITE)) {
            for (Range range : ranges) {
                byte[] data = new byte[(int) range.length()];
                Arrays.fill(data, value);
                channel.write(ByteBuffer.wrap(data), range.offset());
            }
            channel.force(true);
        }
    }

    /** Every reported block within {@code granularity}-aligned bounds of a written range. */
    private static void assertNear(List<Range> reported, List<Range> written, long granularity) {
        for (Range range : reported) {
            for (long at = range.offset(); at < range.end(); at += BLOCK) {
                long byteAt = at;
                assertTrue(written.stream().anyMatch(w -> w.offset() / granularity * granularity <= byteAt
                        && byteAt < (w.end() + granularity - 1) / granularity * granularity),
                        "reported block at " + at + " is farther than " + granularity + " bytes from what was written: " + reported);
            }
        }
    }

    /** The 4 KiB blocks where two snapshots' files in {@code dir} differ, joined into ranges. */
    private static List<Range> differingBlocks(Path dir, Snapshot base, Snapshot target) throws Exception {
        Path a = dir.resolve(name(base) + ".img");
        Path b = dir.resolve(name(target) + ".img");
        List<Range> ranges = new ArrayList<>();
        try (FileChannel left = FileChannel.open(a); FileChannel right = FileChannel.open(b)) {
            ByteBuffer x = ByteBuffer.allocate(BLOCK);
            ByteBuffer y = ByteBuffer.allocate(BLOCK);
            for (long at = 0; at < SIZE; at += BLOCK) {
                x.clear();
                y.clear();
                left.read(x, at);
                right.read(y, at);
                if (!Arrays.equals(x.array(), y.array())) {
                    Range last = ranges.isEmpty() ? null : ranges.getLast();
                    if (last != null && last.end() == at) {
                        ranges.set(ranges.size() - 1, new Range(last.offset(), last.length() + BLOCK));
                    } else {
                        ranges.add(new Range(at, BLOCK));
                    }
                }
            }
        }
        return ranges;
    }

}
