import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.agent.api.ContentChunk;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.CreateSnapshotRequest;
import dev.strata.csi.agent.api.DeleteSnapshotRequest;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.ReadContentRequest;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyRequest;
import dev.strata.csi.agent.api.ReceiveSnapshotCopyResponse;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.agent.api.WriteSnapshotCopyResponse;
import dev.strata.csi.auth.AgentToken;
import io.grpc.CallCredentials;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.io.RandomAccessFile;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Snapshot copies between two node-servers as processes (with a controller-server, which makes the
 * volume): a volume full of data, snapshot S1 copied whole to the other node, 1% of its blocks
 * rewritten (scattered writes of 4 KiB to 64 KiB), snapshot S2 copied incrementally on the copy of
 * S1, then S2 copied whole (its copy removed first) in the same run. The benchmark stands in for
 * controller-server's relay (the controller side of copies is another branch's): it calls the
 * agents' ReceiveSnapshotCopy, ReadContent and WriteSnapshotCopy on the plaintext agent channel,
 * as the other benchmarks run it, relaying each chunk as the target takes it. Bytes sent are the
 * sending node-server's strata_transfer_bytes_total{direction="sent"} (its /metrics), before and
 * after each copy. Pools are loop-mounted filesystems ($FS: xfs with reflink, the default, or
 * ext4). Run through hack/snapshot-copies-bench.sh, as root.
 */
public final class SnapshotCopiesBench {

    private static final long MIB = 1L << 20;
    private static final int BLOCK = 4096;
    private static final Pattern SENT = Pattern.compile("(?m)^strata_transfer_bytes_total\\{direction=\"sent\"\\} (\\S+)$");

    public static void main(String[] args) throws Exception {
        Path repo = Path.of(args[0]);
        long size = Long.parseLong(args.length > 1 ? args[1] : "1024") * MIB;
        String fs = System.getenv().getOrDefault("FS", "xfs");
        List<Path> mounted = new ArrayList<>();
        LocalCluster.PoolSetup pools = (node, pool) -> {
            Path image = pool.resolveSibling("pool-filesystem.img");
            try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
                file.setLength(5 * size + 1024 * MIB); // the volume, two snapshots and two copies as the pool reserves them, metadata
            }
            SnapshotMetadataBench.run(fs.equals("xfs") ? List.of("mkfs.xfs", "-q", "-m", "reflink=1", image.toString())
                    : List.of("mkfs.ext4", "-q", "-F", image.toString()));
            SnapshotMetadataBench.run(List.of("mount", "-o", "loop", image.toString(), pool.toString()));
            mounted.add(pool);
        };
        try (LocalCluster cluster = LocalCluster.start(repo, LocalCluster.Jvm.deployed(repo), pools,
                List.of("--http-endpoint", "127.0.0.1:0"), "node-a", "node-b")) {
            System.out.printf("machine: %s%npools: %s; volume %d MiB full of data; between S1 and S2 1%% of its blocks rewritten%n%n",
                    Bench.machine(), fs.equals("xfs") ? "xfs (reflinks)" : "ext4 (copies)", size >> 20);
            CallCredentials token = AgentToken.fromFile(cluster.tokenFile()).credentials();
            ManagedChannel a = NettyChannelBuilder.forAddress("127.0.0.1", cluster.loggedPort("node-a", "tcp")).usePlaintext().build();
            ManagedChannel b = NettyChannelBuilder.forAddress("127.0.0.1", cluster.loggedPort("node-b", "tcp")).usePlaintext().build();
            URI metrics = URI.create("http://127.0.0.1:" + cluster.loggedPort("node-a", "http") + "/metrics");
            try {
                cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName("bench-copies")
                        .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(size))
                        .addVolumeCapabilities(VolumeCapability.newBuilder().setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                                .setAccessMode(VolumeCapability.AccessMode.newBuilder()
                                        .setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)))
                        .setAccessibilityRequirements(TopologyRequirement.newBuilder().addRequisite(LocalCluster.on("node-a"))).build());
                Path image = cluster.pool("node-a").resolve("bench-copies.img");
                SnapshotMetadataBench.fill(image, size);
                var agentA = NodeAgentGrpc.newBlockingStub(a).withCallCredentials(token);
                var agentB = NodeAgentGrpc.newBlockingStub(b).withCallCredentials(token);
                Snapshot s1 = agentA.withDeadlineAfter(300, TimeUnit.SECONDS).createSnapshot(CreateSnapshotRequest.newBuilder()
                        .setName("bench-s1").setSourceVolume("bench-copies").addCopyNodes("node-b").build()).getSnapshot();
                Result first = copy(a, b, token, metrics, s1, "");
                Rewrite rewrite = rewriteOnePercent(image, size);
                long changed = rewrite.bytes();
                Snapshot s2 = agentA.withDeadlineAfter(300, TimeUnit.SECONDS).createSnapshot(CreateSnapshotRequest.newBuilder()
                        .setName("bench-s2").setSourceVolume("bench-copies").addCopyNodes("node-b").build()).getSnapshot();
                Result incremental = copy(a, b, token, metrics, s2, "bench-s1");
                agentB.withDeadlineAfter(300, TimeUnit.SECONDS).deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName("bench-s2").build());
                Result whole = copy(a, b, token, metrics, s2, "");

                System.out.printf("%-34s %14s %16s %10s %12s%n", "copy to node-b", "bytes sent", "written on b", "seconds", "MiB/s");
                print("S1, whole", first);
                print("S2, incremental (base S1)", incremental);
                print("S2, whole (no base)", whole);
                double ratio = (double) incremental.sent() / changed;
                System.out.printf("%nchanged between S1 and S2: %d bytes in %d writes of 4 to 64 KiB; incremental sent %d: %.3fx the changed bytes"
                        + " (at most 1.1x: %s); %.2f%% of the whole copy's%n", changed, rewrite.writes(), incremental.sent(), ratio,
                        ratio <= 1.1 ? "holds" : "FAILS", 100.0 * incremental.sent() / whole.sent());
                System.out.printf("(bytes sent: node-a's strata_transfer_bytes_total{direction=\"sent\"}, data bytes; zero ranges are"
                        + " messages of 16 bytes; written on b: WriteSnapshotCopyResponse.written_bytes)%nthe servers' logs: %s%n", cluster.work);
                for (String name : List.of("bench-s2", "bench-s1")) {
                    agentB.withDeadlineAfter(300, TimeUnit.SECONDS).deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName(name).build());
                    agentA.withDeadlineAfter(300, TimeUnit.SECONDS).deleteSnapshot(DeleteSnapshotRequest.newBuilder().setName(name).build());
                }
                cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("local/node-a/bench-copies").build());
                if (ratio > 1.1) {
                    System.exit(1);
                }
            } finally {
                a.shutdownNow();
                b.shutdownNow();
            }
        } finally {
            for (Path pool : mounted) {
                SnapshotMetadataBench.unmount(pool); // as SnapshotMetadataBench's pools
                Files.delete(pool.resolveSibling("pool-filesystem.img"));
            }
        }
    }

    private record Result(long sent, long written, double seconds) {}

    private static void print(String what, Result result) {
        System.out.printf("%-34s %10d MiB %12d MiB %10.2f %12.1f%n", what, result.sent() >> 20, result.written() >> 20, result.seconds(),
                result.sent() / MIB / result.seconds());
    }

    /**
     * ReceiveSnapshotCopy on node-b, then ReadContent of the snapshot on node-a (on the base node-b
     * answers with) relayed into WriteSnapshotCopy, one message at a time as node-b's stream is ready.
     */
    private static Result copy(ManagedChannel from, ManagedChannel to, CallCredentials token, URI metrics, Snapshot snapshot, String base)
            throws Exception {
        long sentBefore = sent(metrics);
        long started = System.nanoTime();
        ReceiveSnapshotCopyResponse receiving = NodeAgentGrpc.newBlockingStub(to).withCallCredentials(token).withDeadlineAfter(300, TimeUnit.SECONDS)
                .receiveSnapshotCopy(ReceiveSnapshotCopyRequest.newBuilder().setName(snapshot.getName()).setOriginNode("node-a")
                        .setSnapshot(snapshot).setBaseSnapshot(base).setPool(PoolKind.POOL_IMAGE).build());
        if (!receiving.getBaseSnapshot().equals(base)) {
            throw new IllegalStateException("node-b builds " + snapshot.getName() + " on '" + receiving.getBaseSnapshot() + "', not '" + base + "'");
        }
        Iterator<ContentChunk> read = NodeAgentGrpc.newBlockingStub(from).withCallCredentials(token).withDeadlineAfter(1, TimeUnit.HOURS)
                .readContent(ReadContentRequest.newBuilder().setSource(ContentSource.newBuilder().setSnapshot(snapshot.getName()))
                        .setBaseSnapshot(receiving.getBaseSnapshot()).setTag(receiving.getTag()).setOffset(receiving.getReceivedBytes()).build());
        CompletableFuture<WriteSnapshotCopyResponse> result = new CompletableFuture<>();
        var write = (ClientCallStreamObserver<WriteContentRequest>) NodeAgentGrpc.newStub(to).withCallCredentials(token)
                .withDeadlineAfter(1, TimeUnit.HOURS).writeSnapshotCopy(new StreamObserver<>() {
                    @Override
                    public void onNext(WriteSnapshotCopyResponse response) {
                        result.complete(response);
                    }

                    @Override
                    public void onError(Throwable t) {
                        result.completeExceptionally(t);
                    }

                    @Override
                    public void onCompleted() {
                    }
                });
        while (read.hasNext()) {
            ContentChunk chunk = read.next();
            while (!write.isReady() && !result.isDone()) {
                Thread.sleep(1);
            }
            write.onNext(WriteContentRequest.newBuilder().setName(snapshot.getName()).setChunk(chunk).build());
        }
        write.onCompleted();
        WriteSnapshotCopyResponse done = result.get(1, TimeUnit.HOURS);
        return new Result(sent(metrics) - sentBefore, done.getWrittenBytes(), (System.nanoTime() - started) / 1e9);
    }

    /** node-a's data bytes sent to other nodes so far, from its /metrics. */
    private static long sent(URI metrics) throws Exception {
        String text = HttpClient.newHttpClient().send(HttpRequest.newBuilder(metrics).build(), HttpResponse.BodyHandlers.ofString()).body();
        Matcher found = SENT.matcher(text);
        return found.find() ? (long) Double.parseDouble(found.group(1)) : 0;
    }


    /** What a rewrite wrote: bytes, in how many writes. */
    private record Rewrite(long bytes, int writes) {}

    /**
     * 1% of the volume rewritten by writes of 4 to 64 KiB (whole blocks) at random places, each in
     * a 128 KiB slot of its own so that none overlaps another.
     */
    private static Rewrite rewriteOnePercent(Path image, long size) throws Exception {
        Random random = new Random(36);
        long slot = 128 * 1024;
        long[] slots = random.longs(size / slot, 0, size / slot).distinct().toArray();
        long target = size / 100;
        long written = 0;
        int writes = 0;
        byte[] data = new byte[64 * 1024];
        try (FileChannel file = FileChannel.open(image, StandardOpenOption.WRITE)) {
            for (int i = 0; i < slots.length && written < target; i++) {
                int length = BLOCK * (1 + random.nextInt(16));
                long offset = slots[i] * slot + BLOCK * (long) random.nextInt((int) ((slot - length) / BLOCK) + 1);
                random.nextBytes(data);
                file.write(ByteBuffer.wrap(data, 0, length), offset);
                written += length;
                writes++;
            }
            file.force(true);
        }
        return new Rewrite(written, writes);
    }
}
