import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * Snapshot time of a 1 GiB volume holding 512 MiB of data (in 1 MiB pieces every 2 MiB, holes
 * between) on a pool that reflinks (xfs, reflink=1) and on one that copies (ext4), each beside
 * `cp` of the same image on the same filesystem in the same round (--reflink=always on xfs,
 * --sparse=always on ext4); then the restore of the ext4 node's snapshot onto another node (its
 * pool another ext4), streamed through controller-server, beside `cp --sparse=always` of the same
 * snapshot file between the two pools, with controller-server's resident memory during the
 * restores. Pools are loop-mounted filesystem images of their own. Run through
 * hack/snapshot-bench.sh, as root.
 */
public final class SnapshotBench {

    private static final long MIB = 1L << 20;
    private static final long SIZE = 1024 * MIB;
    private static final long DATA = 512 * MIB;
    private static final String REFLINK = "node-reflink";
    private static final String COPY = "node-copy";
    private static final String TARGET = "node-target";

    public static void main(String[] args) throws Exception {
        Path repo = Path.of(args[0]);
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        List<Path> mounted = new ArrayList<>();
        LocalCluster.PoolSetup pools = (node, pool) -> {
            Path image = pool.resolveSibling("pool-filesystem.img");
            try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
                file.setLength(6L << 30);
            }
            if (node.equals(REFLINK)) {
                run("mkfs.xfs", "-q", "-m", "reflink=1", image.toString());
            } else {
                run("mkfs.ext4", "-q", "-F", image.toString());
            }
            run("mount", "-o", "loop", image.toString(), pool.toString());
            mounted.add(pool);
        };
        try (LocalCluster cluster = LocalCluster.start(repo, LocalCluster.Jvm.deployed(repo), pools, REFLINK, COPY, TARGET)) {
            System.out.printf("machine: %s; load at the start %s%n", Bench.machine(), load());
            System.out.printf("volume: %d MiB, %d MiB of data; %d rounds, medians (each round: the driver, then the tool)%n%n",
                    SIZE >> 20, DATA >> 20, rounds);
            var controller = cluster.controller();
            VolumeCapability block = VolumeCapability.newBuilder()
                    .setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                    .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER))
                    .build();
            for (String node : List.of(REFLINK, COPY)) {
                controller.createVolume(CreateVolumeRequest.newBuilder().setName("bench-" + node)
                        .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(SIZE)).addVolumeCapabilities(block)
                        .setAccessibilityRequirements(only(node)).build());
                fill(cluster.pool(node).resolve("bench-" + node + ".img"));
            }

            for (String node : List.of(REFLINK, COPY)) {
                Path image = cluster.pool(node).resolve("bench-" + node + ".img");
                List<Double> driver = new ArrayList<>();
                List<Double> tool = new ArrayList<>();
                String cp = node.equals(REFLINK) ? "--reflink=always" : "--sparse=always";
                for (int round = 0; round < rounds; round++) {
                    long start = System.nanoTime();
                    var snapshot = controller.createSnapshot(CreateSnapshotRequest.newBuilder().setName("bench-snap-" + round)
                            .setSourceVolumeId("local/" + node + "/bench-" + node).build()).getSnapshot();
                    driver.add(seconds(start));
                    controller.deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
                    Path copy = image.resolveSibling("cp-" + round + ".img");
                    start = System.nanoTime();
                    run("cp", cp, image.toString(), copy.toString());
                    run("sync", "-f", copy.toString());
                    tool.add(seconds(start));
                    Files.delete(copy);
                }
                System.out.printf("snapshot on %-13s CreateSnapshot %7.3f s   cp %-16s + sync %7.3f s   ratio %5.2fx%n",
                        node.equals(REFLINK) ? "xfs (reflink)" : "ext4 (copy)", median(driver), cp, median(tool),
                        median(driver) / median(tool));
            }

            var snapshot = controller.createSnapshot(CreateSnapshotRequest.newBuilder().setName("bench-restore-source")
                    .setSourceVolumeId("local/" + COPY + "/bench-" + COPY).build()).getSnapshot();
            Path snapshotFile = cluster.pool(COPY).resolve("snapshots/bench-restore-source.img");
            List<Double> driver = new ArrayList<>();
            List<Double> tool = new ArrayList<>();
            long idleRss = rssKiB(cluster.pid("controller"));
            long peakRss = idleRss;
            for (int round = 0; round < rounds; round++) {
                String name = "bench-restored-" + round;
                Sampler sampler = new Sampler(cluster.pid("controller"));
                long start = System.nanoTime();
                var restored = controller.createVolume(CreateVolumeRequest.newBuilder().setName(name)
                        .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(SIZE)).addVolumeCapabilities(block)
                        .setVolumeContentSource(VolumeContentSource.newBuilder().setSnapshot(
                                VolumeContentSource.SnapshotSource.newBuilder().setSnapshotId(snapshot.getSnapshotId())))
                        .setAccessibilityRequirements(only(TARGET)).build()).getVolume();
                driver.add(seconds(start));
                peakRss = Math.max(peakRss, sampler.stop());
                if (!restored.getVolumeId().equals("local/" + TARGET + "/" + name)) {
                    throw new IllegalStateException("restored on the wrong node: " + restored.getVolumeId());
                }
                controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(restored.getVolumeId()).build());
                Path copy = cluster.pool(TARGET).resolve("cp-" + round + ".img");
                start = System.nanoTime();
                run("cp", "--sparse=always", snapshotFile.toString(), copy.toString());
                run("sync", "-f", copy.toString());
                tool.add(seconds(start));
                Files.delete(copy);
            }
            controller.deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
            double mib = DATA / (double) MIB;
            System.out.printf("%nrestore onto another node (ext4 -> ext4, through controller-server): %7.3f s, %6.0f MiB/s of data%n",
                    median(driver), mib / median(driver));
            System.out.printf("cp --sparse=always of the snapshot file between the pools + sync:     %7.3f s, %6.0f MiB/s%n",
                    median(tool), mib / median(tool));
            System.out.printf("ratio (restore time / cp time): %.2fx%n", median(driver) / median(tool));
            System.out.printf("controller-server resident memory: %d MiB before the restores, at most %d MiB during them%n",
                    idleRss >> 10, peakRss >> 10);
            for (String node : List.of(REFLINK, COPY)) {
                controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId("local/" + node + "/bench-" + node).build());
            }
            // The pools' own filesystems are this benchmark's, not the driver's leftovers.
            List<String> left = cluster.stopAndListLeftovers().stream()
                    .filter(entry -> !entry.contains("pool-filesystem.img") && !entry.endsWith("/pool")
                            && !entry.endsWith("/lost+found") && !entry.endsWith("/snapshots"))
                    .toList();
            System.out.printf("%nload at the end %s; left behind: %s; the servers' logs: %s%n", load(), left.isEmpty() ? "nothing" : left,
                    cluster.work);
        } finally {
            for (Path pool : mounted) {
                run("umount", pool.toString()); // the loop device goes with it (autoclear)
                Files.delete(pool.resolveSibling("pool-filesystem.img"));
            }
        }
    }

    /** DATA bytes of random data in 1 MiB pieces, one every 2 MiB, synced: a sparse image half full. */
    private static void fill(Path image) throws Exception {
        byte[] piece = new byte[(int) MIB];
        Random random = new Random(1);
        try (RandomAccessFile file = new RandomAccessFile(image.toFile(), "rw")) {
            for (long offset = 0; offset < 2 * DATA; offset += 2 * MIB) {
                random.nextBytes(piece);
                file.seek(offset);
                file.write(piece);
            }
            file.getFD().sync();
        }
    }

    private static TopologyRequirement only(String node) {
        return TopologyRequirement.newBuilder().addPreferred(LocalCluster.on(node)).addRequisite(LocalCluster.on(node)).build();
    }

    /** The largest VmRSS of a process while something else runs, sampled every 20 ms. */
    private static final class Sampler {
        private final Thread thread;
        private volatile boolean stopped;
        private volatile long peak;

        Sampler(long pid) {
            thread = Thread.ofPlatform().daemon(true).start(() -> {
                while (!stopped) {
                    peak = Math.max(peak, rssKiB(pid));
                    try {
                        Thread.sleep(20);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
        }

        long stop() throws InterruptedException {
            stopped = true;
            thread.join();
            return peak;
        }
    }

    private static long rssKiB(long pid) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", ""));
                }
            }
        } catch (Exception e) {
            // the process is gone
        }
        return 0;
    }

    private static double seconds(long startNanos) {
        return (System.nanoTime() - startNanos) / 1e9;
    }

    private static double median(List<Double> values) {
        List<Double> sorted = values.stream().sorted().toList();
        return sorted.get(sorted.size() / 2);
    }

    private static String load() throws Exception {
        return Files.readString(Path.of("/proc/loadavg")).split(" ", 4)[0];
    }

    private static String run(String... command) throws Exception {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (process.waitFor() != 0) {
            throw new IllegalStateException(String.join(" ", command) + ": " + out);
        }
        return out;
    }
}
