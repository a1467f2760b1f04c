import csi.v1.ControllerGrpc;
import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerGetVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.Topology;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.auth.AgentToken;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollIoHandler;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The scale benchmark (hack/scale-bench.sh; docs/scale.md has the figures): controller-server, the
 * real program as deployed (deploy/jvm.options, under the memory limit its Deployment would have),
 * with N simulated nodes ({@link ScaleNodes}) of 100 volumes each, then with 1% of them hung.
 * Prints one table row per run. Arguments: the repository, node counts (10,100,1000,5000), volumes
 * per node (100), the controller's memory limit ("auto": as docs/scale.md advises for the number of
 * volumes; a size such as 512m; or "none": the machine's memory).
 */
public final class ScaleBench {

    static final int CREATES = 200;
    static final long MIB = 1 << 20;
    static final MultiThreadIoEventLoopGroup CLIENT_LOOP = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());

    public static void main(String[] args) throws Exception {
        Path repo = Path.of(args[0]);
        List<Integer> sizes = args.length > 1 ? List.of(args[1].split(",")).stream().map(Integer::parseInt).toList()
                : List.of(10, 100, 1000, 5000);
        int volumes = args.length > 2 ? Integer.parseInt(args[2]) : 100;
        String memory = args.length > 3 ? args[3] : "auto";
        System.out.println("| nodes | hung | memory limit | create p50 / p99 ms (WFFC) | create p50 / p99 ms (Immediate) "
                + "| delete p50 / p99 ms | GetVolume p50 / p99 ms | failures | ListVolumes paged s (entries) | ListSnapshots paged s "
                + "| GetCapacity p50 ms | RSS MiB | CPU % of a core, renewals |");
        System.out.println("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for (int nodes : sizes) {
            String limit = memory.equals("auto") ? limitFor((long) nodes * volumes) : memory;
            for (double hung : new double[] {0, 0.01}) {
                System.out.println(run(repo, nodes, volumes, hung, limit));
            }
        }
        CLIENT_LOOP.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
        System.exit(0); // gRPC's and the simulated agents' pools hold non-daemon threads
    }

    /**
     * The controller's memory limit docs/scale.md advises: 1.5 KiB per volume, at least the
     * Deployment's 320Mi. deploy/jvm.options sizes the heap from it (MaxRAMPercentage).
     */
    static String limitFor(long volumes) {
        return Math.max(320, Math.ceilDiv(volumes * 3 / 2, 1024)) + "m";
    }

    static String run(Path repo, int count, int volumes, double hungShare, String limit) throws Exception {
        Path dir = Files.createTempDirectory("strata-scale");
        Path token = Files.writeString(dir.resolve("token"), "scale-benchmark-token-0123456789\n");
        int registryPort;
        try (ServerSocket socket = new ServerSocket(0)) {
            registryPort = socket.getLocalPort();
        }
        Path csi = dir.resolve("csi.sock");
        List<String> java = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "@" + repo.resolve("deploy/jvm.options")));
        if (!limit.equals("none")) {
            java.add("-XX:MaxRAM=" + limit); // what the JVM sees in a container with that memory limit
        }
        Process controller = new ProcessBuilder(Stream.concat(java.stream(), Stream.of(
                "-jar", repo.resolve("controller-server/target/controller-server.jar").toString(),
                "--endpoint", "unix://" + csi, "--agent-registry-address", "127.0.0.1:" + registryPort,
                "--agent-token-file", token.toString(), "--agent-plaintext", "true", "--agent-settle-time", "0s",
                "--agent-renew-interval", "10s")).toList())
                .redirectErrorStream(true).redirectOutput(dir.resolve("controller.log").toFile()).start();
        // The registry listening before the simulated agents take ephemeral ports, one of which could be its own.
        long listening = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        Path log = dir.resolve("controller.log");
        while (!Files.readString(log).contains("tcp://127.0.0.1:" + registryPort)) {
            if (System.nanoTime() > listening || !controller.isAlive()) {
                throw new IllegalStateException("controller-server is not listening; see " + log);
            }
            Thread.sleep(100);
        }
        AgentSecurity security = new AgentSecurity(AgentSecurity.Side.NODE, AgentToken.fromFile(token), Optional.empty(),
                Optional.empty(), Optional.empty(), Optional.empty());
        int hungCount = (int) Math.round(count * hungShare);
        String row;
        try (ScaleNodes nodes = new ScaleNodes(security, "127.0.0.1:" + registryPort, 10_000)) {
            for (int i = 0; i < count; i++) {
                nodes.start(String.format(Locale.ROOT, "node-%05d", i), volumes, i < hungCount);
            }
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (!Files.exists(csi) || nodes.nodes().stream().anyMatch(node -> !node.registered())) {
                if (System.nanoTime() > until) {
                    throw new IllegalStateException("not every node registered in 2 minutes; see " + dir.resolve("controller.log"));
                }
                Thread.sleep(200);
            }
            ManagedChannel channel = NettyChannelBuilder.forAddress(new DomainSocketAddress(csi.toFile())).eventLoopGroup(CLIENT_LOOP)
                    .channelType(EpollDomainSocketChannel.class).usePlaintext().build();
            var stub = ControllerGrpc.newBlockingStub(channel);
            List<String> healthy = nodes.healthy();
            int[] failures = {0};
            List<Double> wffc = new ArrayList<>();
            List<Double> immediate = new ArrayList<>();
            List<Double> deletes = new ArrayList<>();
            List<String> made = new ArrayList<>();
            for (int round = 0; round < CREATES; round++) {
                int i = round;
                String node = healthy.get(ThreadLocalRandom.current().nextInt(healthy.size()));
                timed(wffc, failures, () -> made.add(stub.createVolume(create("pvc-bench-w" + i, Optional.of(node))).getVolume().getVolumeId()));
                timed(immediate, failures, () -> made.add(stub.createVolume(create("pvc-bench-i" + i, Optional.empty())).getVolume().getVolumeId()));
            }
            List<Double> gets = new ArrayList<>();
            for (String id : made.subList(0, Math.min(100, made.size()))) {
                timed(gets, failures, () -> stub.controllerGetVolume(ControllerGetVolumeRequest.newBuilder().setVolumeId(id).build()));
            }
            for (String id : made) {
                timed(deletes, failures, () -> stub.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(id).build()));
            }
            long started = System.nanoTime();
            int listed = 0;
            String next = "";
            do {
                var page = stub.listVolumes(ListVolumesRequest.newBuilder().setMaxEntries(1000).setStartingToken(next).build());
                listed += page.getEntriesCount();
                next = page.getNextToken();
            } while (!next.isEmpty());
            double listSeconds = (System.nanoTime() - started) / 1e9;
            started = System.nanoTime();
            next = "";
            do {
                var page = stub.listSnapshots(ListSnapshotsRequest.newBuilder().setMaxEntries(1000).setStartingToken(next).build());
                next = page.getNextToken();
            } while (!next.isEmpty());
            double snapshotSeconds = (System.nanoTime() - started) / 1e9;
            List<Double> capacity = new ArrayList<>();
            for (int i = 0; i < 50; i++) {
                String node = healthy.get(ThreadLocalRandom.current().nextInt(healthy.size()));
                timed(capacity, failures, () -> stub.getCapacity(GetCapacityRequest.newBuilder().setAccessibleTopology(on(node)).build()));
            }
            // Renewals only: the controller's CPU over 30 s.
            long cpuBefore = cpuTicks(controller.pid());
            Thread.sleep(30_000);
            double cpu = (cpuTicks(controller.pid()) - cpuBefore) / 100.0 / 30 * 100;
            long rss = rssKib(controller.pid()) / 1024;
            channel.shutdownNow();
            row = String.format(Locale.ROOT,
                    "| %d | %d | %s | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %d | %.2f (%d) | %.2f | %.1f | %d | %.1f |",
                    count, hungCount, limit, pct(wffc, 50), pct(wffc, 99), pct(immediate, 50), pct(immediate, 99), pct(deletes, 50),
                    pct(deletes, 99), pct(gets, 50), pct(gets, 99), failures[0], listSeconds, listed, snapshotSeconds, pct(capacity, 50), rss, cpu);
        } finally {
            controller.destroyForcibly().waitFor();
        }
        // A finished run's token and log are of no further use; a failed run's error names its log, which stays.
        LocalCluster.removeTree(dir);
        return row;
    }

    interface Call {
        void run();
    }

    /** Times one call in milliseconds; a failure is counted (and its time too). */
    static void timed(List<Double> times, int[] failures, Call call) {
        long started = System.nanoTime();
        try {
            call.run();
        } catch (StatusRuntimeException e) {
            failures[0]++;
            System.err.println("failed: " + e.getStatus());
        }
        times.add((System.nanoTime() - started) / 1e6);
    }

    static double pct(List<Double> values, int percentile) {
        if (values.isEmpty()) {
            return Double.NaN;
        }
        List<Double> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        return sorted.get(Math.min(sorted.size() - 1, (int) Math.ceil(percentile / 100.0 * sorted.size()) - 1));
    }

    static CreateVolumeRequest create(String name, Optional<String> node) {
        CreateVolumeRequest.Builder request = CreateVolumeRequest.newBuilder().setName(name)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(64 * MIB))
                .addVolumeCapabilities(VolumeCapability.newBuilder()
                        .setMount(VolumeCapability.MountVolume.newBuilder().setFsType("ext4"))
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER)));
        node.ifPresent(id -> request.setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(on(id)).addRequisite(on(id))));
        return request.build();
    }

    static Topology on(String node) {
        return Topology.newBuilder().putSegments("topology.strata.csi.dev/node", node).build();
    }

    static long cpuTicks(long pid) throws IOException {
        String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
        String[] fields = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Long.parseLong(fields[11]) + Long.parseLong(fields[12]); // utime, stime
    }

    static long rssKib(long pid) throws IOException {
        return Files.readAllLines(Path.of("/proc/" + pid + "/status")).stream().filter(line -> line.startsWith("VmRSS:"))
                .map(line -> Long.parseLong(line.replaceAll("[^0-9]", ""))).findFirst().orElse(-1L);
    }

    private ScaleBench() {}
}
