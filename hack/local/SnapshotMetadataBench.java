import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.GetMetadataDeltaRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.VolumeCapability;
import java.io.RandomAccessFile;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * GetMetadataDelta of a volume full of data with 1% of its 4 KiB blocks rewritten between two
 * snapshots, on an image pool that reflinks (xfs) and on one that copies (ext4), through
 * controller-server as a backup tool calls it: its time and the bytes node-server read for it
 * (/proc/PID/io rchar), beside reading both snapshots whole, the work a backup without changed
 * block tracking does. Pools are loop-mounted filesystems of their own. Run through
 * hack/snapshot-metadata-bench.sh, as root.
 */
public final class SnapshotMetadataBench {

    private static final long MIB = 1L << 20;
    private static final int BLOCK = 4096;
    private static final String REFLINK = "node-reflink";
    private static final String COPY = "node-copy";

    public static void main(String[] args) throws Exception {
        Path repo = Path.of(args[0]);
        long size = Long.parseLong(args.length > 1 ? args[1] : "10240") * MIB;
        List<Path> mounted = new ArrayList<>();
        LocalCluster.PoolSetup pools = (node, pool) -> {
            Path image = pool.resolveSibling("pool-filesystem.img");
            try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
                file.setLength(4 * size + 1024 * MIB); // the volume and two snapshots as the pool reserves them (a reflink too), metadata
            }
            run(node.equals(REFLINK) ? List.of("mkfs.xfs", "-q", "-m", "reflink=1", image.toString())
                    : List.of("mkfs.ext4", "-q", "-F", image.toString()));
            run(List.of("mount", "-o", "loop", image.toString(), pool.toString()));
            mounted.add(pool);
        };
        try (LocalCluster cluster = LocalCluster.start(repo, LocalCluster.Jvm.deployed(repo), pools, REFLINK, COPY)) {
            System.out.printf("machine: %s%nvolume %d MiB full of data, 1%% of its 4 KiB blocks rewritten between two snapshots%n%n",
                    Bench.machine(), size >> 20);
            System.out.printf("%-22s %12s %12s %14s %9s %10s | %14s %10s%n", "pool", "changed", "delta", "node read", "of full",
                    "delta s", "full read", "full s");
            var controller = cluster.controller();
            VolumeCapability block = VolumeCapability.newBuilder().setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                    .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER))
                    .build();
            for (String node : List.of(REFLINK, COPY)) {
                String volume = "bench-" + node;
                controller.createVolume(CreateVolumeRequest.newBuilder().setName(volume)
                        .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(size)).addVolumeCapabilities(block)
                        .setAccessibilityRequirements(TopologyRequirement.newBuilder().addRequisite(LocalCluster.on(node))).build());
                Path image = cluster.pool(node).resolve(volume + ".img");
                fill(image, size);
                String base = snapshot(cluster, volume, node, "bench-base-" + node);
                long changed = rewriteOnePercent(image, size);
                String target = snapshot(cluster, volume, node, "bench-target-" + node);

                long readBefore = rchar(cluster.pid(node));
                long start = System.nanoTime();
                long[] delta = {0};
                cluster.snapshotMetadata().getMetadataDelta(GetMetadataDeltaRequest.newBuilder().setBaseSnapshotId(base)
                        .setTargetSnapshotId(target).build()).forEachRemaining(response -> response.getBlockMetadataList()
                        .forEach(range -> delta[0] += range.getSizeBytes()));
                double deltaSeconds = (System.nanoTime() - start) / 1e9;
                long nodeRead = rchar(cluster.pid(node)) - readBefore;

                Path snapshots = cluster.pool(node).resolve("snapshots");
                start = System.nanoTime();
                long full = readWhole(snapshots.resolve(name(base) + ".img")) + readWhole(snapshots.resolve(name(target) + ".img"));
                double fullSeconds = (System.nanoTime() - start) / 1e9;
                System.out.printf("%-22s %9d MiB %9d MiB %10d MiB %8.2f%% %10.2f | %10d MiB %10.2f%n",
                        node.equals(REFLINK) ? "image, xfs (reflinks)" : "image, ext4 (copies)", changed >> 20, delta[0] >> 20,
                        nodeRead >> 20, 100.0 * nodeRead / full, deltaSeconds, full >> 20, fullSeconds);
                for (String snapshot : List.of(base, target)) {
                    controller.deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot).build());
                }
                controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("local/" + node + "/" + volume).build());
            }
            System.out.printf("%n(node read: every read(2) of node-server during the call, page cache or disk; the full read:"
                    + " both snapshot files read whole by this benchmark)%nthe servers' logs: %s%n", cluster.work);
        } finally {
            for (Path pool : mounted) {
                unmount(pool); // the loop device goes with it (autoclear)
                Files.delete(pool.resolveSibling("pool-filesystem.img"));
            }
        }
    }

    /** Unmounts the pool once the killed node-server has let go of it (a few seconds at most). */
    static void unmount(Path pool) throws Exception {
        for (int attempt = 1; ; attempt++) {
            try {
                run(List.of("umount", pool.toString()));
                return;
            } catch (IllegalStateException e) {
                if (attempt == 20) {
                    System.err.println("cannot unmount " + pool + ": " + e.getMessage());
                    return;
                }
                Thread.sleep(500);
            }
        }
    }

    private static String snapshot(LocalCluster cluster, String volume, String node, String name) {
        return cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder().setName(name)
                .setSourceVolumeId("local/" + node + "/" + volume).build()).getSnapshot().getSnapshotId();
    }

    private static String name(String snapshotId) {
        return snapshotId.substring(snapshotId.lastIndexOf('/') + 1);
    }

    /** Every byte of the image written with pseudo-random data, synced. */
    static void fill(Path image, long size) throws Exception {
        Random random = new Random(39);
        byte[] data = new byte[(int) MIB];
        try (FileChannel file = FileChannel.open(image, StandardOpenOption.WRITE)) {
            for (long at = 0; at < size; at += MIB) {
                random.nextBytes(data);
                file.write(ByteBuffer.wrap(data), at);
            }
            file.force(true);
        }
    }

    /** 1% of the 4 KiB blocks, at random, rewritten; the bytes written. */
    private static long rewriteOnePercent(Path image, long size) throws Exception {
        Random random = new Random(36);
        long blocks = size / BLOCK;
        byte[] data = new byte[BLOCK];
        long[] chosen = random.longs(blocks / 100 * 2, 0, blocks).distinct().limit(blocks / 100).sorted().toArray();
        try (FileChannel file = FileChannel.open(image, StandardOpenOption.WRITE)) {
            for (long blockIndex : chosen) {
                random.nextBytes(data);
                file.write(ByteBuffer.wrap(data), blockIndex * BLOCK);
            }
            file.force(true);
        }
        return chosen.length * (long) BLOCK;
    }

    private static long readWhole(Path file) throws Exception {
        long total = 0;
        ByteBuffer buffer = ByteBuffer.allocateDirect((int) MIB);
        try (FileChannel channel = FileChannel.open(file)) {
            for (int n; (n = channel.read(buffer.clear())) > 0; ) {
                total += n;
            }
        }
        return total;
    }

    /** Bytes the process has read through read(2) and its kind, from /proc/PID/io. */
    private static long rchar(long pid) throws Exception {
        return Files.readAllLines(Path.of("/proc/" + pid + "/io")).stream().filter(line -> line.startsWith("rchar:"))
                .mapToLong(line -> Long.parseLong(line.substring(6).strip())).findFirst().orElseThrow();
    }

    static void run(List<String> command) throws Exception {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String output = new String(process.getInputStream().readAllBytes());
        if (process.waitFor() != 0) {
            throw new IllegalStateException(String.join(" ", command) + ": " + output);
        }
    }
}
