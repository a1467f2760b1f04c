import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Latency of every RPC and of the whole pipeline, beside the same pipeline done with plain tools
 * (truncate, losetup, mkfs.ext4, mount, mount --bind and back) in the same run, alternating
 * round by round so both see the same machine; then CreateVolume throughput at 1, 16 and 100
 * concurrent callers. Run through hack/bench.sh, as root.
 */
public final class Bench {

    private static final long SIZE = 64L << 20;
    private static final String NODE = "node-a";

    public static void main(String[] args) throws Exception {
        int rounds = args.length > 1 ? Integer.parseInt(args[1]) : 30;
        int volumesPerLevel = args.length > 2 ? Integer.parseInt(args[2]) : 200;
        int warmUpRounds = args.length > 3 ? Integer.parseInt(args[3]) : 20;
        try (LocalCluster cluster = LocalCluster.start(Path.of(args[0]), NODE)) {
            Samples driver = new Samples();
            Samples tools = new Samples();
            // Unmeasured rounds first: a node-server runs for days, so what matters is its speed
            // once the JIT has compiled the hot paths; the tools get the same warm page cache.
            for (int round = 0; round < warmUpRounds; round++) {
                driverPipeline(cluster, "warm" + round, new Samples());
                toolPipeline(cluster.work, "warm" + round, new Samples());
            }
            for (int round = 0; round < rounds; round++) {
                driverPipeline(cluster, "r" + round, driver);
                toolPipeline(cluster.work, "r" + round, tools);
            }
            System.out.printf("machine: %s%n%n", machine());
            System.out.printf("Pipeline latency, %d rounds after %d warm-up rounds, %d MiB ext4 volume (ms)%n",
                    rounds, warmUpRounds, SIZE >> 20);
            System.out.printf("  %-28s %9s %9s%n", "driver step", "p50", "p99");
            driver.print();
            System.out.printf("%n  %-28s %9s %9s%n", "plain tools step", "p50", "p99");
            tools.print();
            double ratio = driver.p50("pipeline") / tools.p50("pipeline");
            System.out.printf("%nfull pipeline p50: driver %.1f ms, plain tools %.1f ms, ratio %.2fx (target <= 1.5x)%n",
                    driver.p50("pipeline"), tools.p50("pipeline"), ratio);

            System.out.printf("%nCreateVolume throughput (%d sparse %d MiB volumes per level)%n", volumesPerLevel, SIZE >> 20);
            for (int callers : new int[] {1, 16, 100}) {
                throughput(cluster, callers, volumesPerLevel);
            }
            List<String> left = cluster.stopAndListLeftovers();
            System.out.printf("%nleft behind: %s; the servers' logs: %s%n", left.isEmpty() ? "nothing" : left, cluster.work);
        }
    }

    static void driverPipeline(LocalCluster cluster, String tag, Samples samples) throws Exception {
        var controller = cluster.controller();
        var node = cluster.node(NODE);
        VolumeCapability capability = LocalCluster.ext4();
        Path staging = Files.createDirectories(cluster.work.resolve("kubelet/staging-" + tag));
        Path target = Files.createDirectories(cluster.work.resolve("kubelet/pod-" + tag)).resolve("mount");
        long start = System.nanoTime();
        String id = samples.time("CreateVolume", () -> controller.createVolume(CreateVolumeRequest.newBuilder()
                .setName("bench-" + tag).setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(SIZE))
                .addVolumeCapabilities(capability).build())).getVolume().getVolumeId();
        var context = samples.time("ControllerPublishVolume", () -> controller.controllerPublishVolume(
                ControllerPublishVolumeRequest.newBuilder().setVolumeId(id).setNodeId(NODE).setVolumeCapability(capability).build()))
                .getPublishContextMap();
        samples.time("NodeStageVolume", () -> node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(id)
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).putAllPublishContext(context).build()));
        samples.time("NodePublishVolume", () -> node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(id)
                .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability).build()));
        samples.time("NodeUnpublishVolume", () -> node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder()
                .setVolumeId(id).setTargetPath(target.toString()).build()));
        samples.time("NodeUnstageVolume", () -> node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder()
                .setVolumeId(id).setStagingTargetPath(staging.toString()).build()));
        samples.time("ControllerUnpublishVolume", () -> controller.controllerUnpublishVolume(
                ControllerUnpublishVolumeRequest.newBuilder().setVolumeId(id).setNodeId(NODE).build()));
        samples.time("DeleteVolume", () -> controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(id).build()));
        samples.add("pipeline", System.nanoTime() - start);
    }

    /** The same effects with the tools a person would type, mkfs with the driver's options. */
    private static void toolPipeline(Path work, String tag, Samples samples) throws Exception {
        Path dir = Files.createDirectories(work.resolve("tools"));
        Path image = dir.resolve(tag + ".img");
        Path staging = Files.createDirectories(dir.resolve("staging-" + tag));
        Path target = Files.createDirectories(dir.resolve("pod-" + tag));
        long start = System.nanoTime();
        samples.time("truncate", () -> run("truncate", "--size", Long.toString(SIZE), image.toString()));
        String device = samples.time("losetup --find", () -> run("losetup", "--find", "--show", "--direct-io=on", image.toString())).strip();
        samples.time("mkfs.ext4", () -> run("mkfs.ext4", "-q", "-m", "0", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1", device));
        samples.time("mount", () -> run("mount", "-t", "ext4", device, staging.toString()));
        samples.time("mount --bind", () -> run("mount", "--bind", staging.toString(), target.toString()));
        samples.time("umount target", () -> run("umount", target.toString()));
        samples.time("umount staging", () -> run("umount", staging.toString()));
        samples.time("losetup --detach", () -> run("losetup", "--detach", device));
        samples.time("rm", () -> run("rm", image.toString()));
        samples.add("pipeline", System.nanoTime() - start);
    }

    private static void throughput(LocalCluster cluster, int callers, int volumes) throws Exception {
        var controller = cluster.controller();
        AtomicInteger next = new AtomicInteger();
        List<String> ids = Collections.synchronizedList(new ArrayList<>());
        ExecutorService pool = Executors.newFixedThreadPool(callers);
        long start = System.nanoTime();
        List<Future<?>> work = new ArrayList<>();
        for (int c = 0; c < callers; c++) {
            work.add(pool.submit(() -> {
                for (int i = next.getAndIncrement(); i < volumes; i = next.getAndIncrement()) {
                    ids.add(controller.createVolume(CreateVolumeRequest.newBuilder()
                            .setName("tp-" + callers + "-" + i).setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(SIZE))
                            .addVolumeCapabilities(LocalCluster.ext4()).build()).getVolume().getVolumeId());
                }
                return null;
            }));
        }
        for (Future<?> f : work) {
            f.get();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        pool.shutdown();
        pool.awaitTermination(1, TimeUnit.MINUTES);
        System.out.printf("  %3d callers: %6.1f volumes/s (%d in %.2f s)%n", callers, ids.size() / seconds, ids.size(), seconds);
        for (String id : ids) {
            controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(id).build());
        }
    }

    static String run(String... command) throws Exception {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (process.waitFor() != 0) {
            throw new IllegalStateException(String.join(" ", command) + ": " + out);
        }
        return out;
    }

    static String machine() throws Exception {
        String cpu = Files.readAllLines(Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("model name"))
                .findFirst().map(l -> l.substring(l.indexOf(':') + 2)).orElse("unknown cpu");
        return Runtime.getRuntime().availableProcessors() + " cores, " + cpu + ", kernel "
                + run("uname", "-r").strip() + ", Java " + System.getProperty("java.version")
                + ", pool on " + run("stat", "-f", "-c", "%T", "/tmp").strip();
    }

    /** Latencies per step in nanoseconds, in insertion order of the steps. */
    static final class Samples {
        private final Map<String, List<Long>> byStep = new LinkedHashMap<>();

        interface Step<T> {
            T call() throws Exception;
        }

        <T> T time(String step, Step<T> call) throws Exception {
            long start = System.nanoTime();
            T result = call.call();
            add(step, System.nanoTime() - start);
            return result;
        }

        void add(String step, long nanos) {
            byStep.computeIfAbsent(step, k -> new ArrayList<>()).add(nanos);
        }

        double p50(String step) {
            return percentile(step, 0.50);
        }

        private double percentile(String step, double p) {
            List<Long> sorted = new ArrayList<>(byStep.get(step));
            Collections.sort(sorted);
            int index = (int) Math.ceil(p * sorted.size()) - 1;
            return sorted.get(Math.max(0, index)) / 1e6;
        }

        void print() {
            for (String step : byStep.keySet()) {
                System.out.printf("  %-28s %9.2f %9.2f%n", step, percentile(step, 0.50), percentile(step, 0.99));
            }
        }
    }
}
