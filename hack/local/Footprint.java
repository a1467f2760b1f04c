import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * What each server costs on a node, beside two baselines with the same options measured in the
 * same run: a bare JVM, and the floor of the servers' stack (GrpcFloor: gRPC over Netty, protobuf,
 * the CSI messages, nothing of the driver). For each: resident memory idle and after a fixed
 * workload (full pipelines; Probe calls for the floor), and the time from exec to ready (Probe
 * answers ready; for the baselines, they say so), median of several starts. Run by
 * hack/footprint.sh.
 *
 * <p>The servers run as deployed (deploy/jvm.options, with the AOT caches of hack/aot-cache.sh
 * where the JDK has them), and beside them any other variants asked for: another options file,
 * with or without AOT caches, or another build. Variants take turns start by start and run their
 * workloads at the same time, so a comparison sees the same machine and the same load.
 */
final class Footprint {

    private static final String NODE = "node-a";
    /** About the calls a full pipeline makes to each server, so that the floor does the same number. */
    private static final int FLOOR_CALLS_PER_PIPELINE = 10;

    /** One way of running the servers: a build (a repository with its jars) and a JVM. */
    record Variant(String name, Path repo, LocalCluster.Jvm jvm) {

        /** {@code OPTIONS_FILE[@AOT_DIR][#REPO]}: AOT_DIR "-" for none; the repository defaults to this one. */
        static Variant parse(String spec, Path defaultRepo) {
            String rest = spec;
            Path repo = defaultRepo;
            if (rest.contains("#")) {
                repo = Path.of(rest.substring(rest.indexOf('#') + 1)).toAbsolutePath();
                rest = rest.substring(0, rest.indexOf('#'));
            }
            Path aot = null;
            if (rest.contains("@")) {
                String dir = rest.substring(rest.indexOf('@') + 1);
                aot = dir.equals("-") ? null : Path.of(dir).toAbsolutePath();
                rest = rest.substring(0, rest.indexOf('@'));
            }
            Path options = Path.of(rest).toAbsolutePath();
            if (!Files.isRegularFile(options)) {
                throw new IllegalArgumentException("no options file " + options + " (variant " + spec + ")");
            }
            return new Variant(spec, repo, new LocalCluster.Jvm(options, aot, false));
        }
    }

    public static void main(String[] args) throws Exception {
        Path repo = Path.of(args[0]);
        int starts = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        int pipelines = args.length > 2 ? Integer.parseInt(args[2]) : 20;
        long settleMillis = args.length > 3 ? Long.parseLong(args[3]) : 10_000;
        List<Variant> variants = new ArrayList<>(List.of(new Variant("deployed", repo, LocalCluster.Jvm.deployed(repo))));
        for (int i = 4; i < args.length; i++) {
            variants.add(Variant.parse(args[i], repo));
        }
        Path bare = bareJvm();
        Path floorJar = GrpcFloorRun.build(repo);
        List<GrpcFloorRun> floors = new ArrayList<>();
        for (Variant variant : variants) {
            floors.add(GrpcFloorRun.trained(floorJar, variant.repo(), variant.jvm()));
        }
        for (int v = 0; v < variants.size(); v++) {
            Variant variant = variants.get(v);
            System.out.printf("variant %d: %s (%s, jars of %s)%n", v, variant.name(), variant.jvm(), variant.repo());
        }

        int n = variants.size();
        List<List<Long>> bareStarts = lists(n);
        List<List<Long>> floorStarts = lists(n);
        List<List<Long>> controllerStarts = lists(n);
        List<List<Long>> nodeStarts = lists(n);
        for (int i = 0; i < starts; i++) {
            for (int v = 0; v < n; v++) {
                Variant variant = variants.get(v);
                bareStarts.get(v).add(bareExecToReady(variant, bare));
                floorStarts.get(v).add(floors.get(v).execToReadyMillis());
                try (LocalCluster cluster = LocalCluster.start(variant.repo(), variant.jvm(), NODE)) {
                    controllerStarts.get(v).add(cluster.execToReadyMillis("controller"));
                    nodeStarts.get(v).add(cluster.execToReadyMillis(NODE));
                    cluster.stopAndListLeftovers();
                }
            }
        }
        System.out.printf("%nexec to ready, median of %d starts (all starts, in order):%n", starts);
        for (int v = 0; v < n; v++) {
            System.out.printf("  variant %d  %-18s %6d ms  %s%n", v, "bare JVM", median(bareStarts.get(v)), bareStarts.get(v));
            System.out.printf("  variant %d  %-18s %6d ms  %s%n", v, "gRPC floor", median(floorStarts.get(v)), floorStarts.get(v));
            System.out.printf("  variant %d  %-18s %6d ms  %s%n", v, "controller-server", median(controllerStarts.get(v)),
                    controllerStarts.get(v));
            System.out.printf("  variant %d  %-18s %6d ms  %s%n", v, "node-server", median(nodeStarts.get(v)), nodeStarts.get(v));
        }

        List<Process> idle = new ArrayList<>();
        List<GrpcFloorRun.Running> idleFloors = new ArrayList<>();
        List<LocalCluster> clusters = new ArrayList<>();
        try {
            for (Variant variant : variants) {
                Process process = bareProcess(variant, bare);
                idle.add(process);
                awaitLine(process, "ready");
                idleFloors.add(floors.get(variants.indexOf(variant)).start());
                clusters.add(LocalCluster.start(variant.repo(), variant.jvm(), NODE));
            }
            Thread.sleep(settleMillis);
            Memory[] bareIdle = new Memory[n];
            Memory[] floorIdle = new Memory[n];
            Memory[] controllerIdle = new Memory[n];
            Memory[] nodeIdle = new Memory[n];
            for (int v = 0; v < n; v++) {
                bareIdle[v] = Memory.of(idle.get(v).pid());
                floorIdle[v] = Memory.of(idleFloors.get(v).pid());
                controllerIdle[v] = Memory.of(clusters.get(v).pid("controller"));
                nodeIdle[v] = Memory.of(clusters.get(v).pid(NODE));
            }
            for (int i = 0; i < pipelines; i++) {
                for (LocalCluster cluster : clusters) {
                    Bench.driverPipeline(cluster, "footprint-" + i, new Bench.Samples());
                }
            }
            for (GrpcFloorRun.Running floor : idleFloors) {
                floor.work(FLOOR_CALLS_PER_PIPELINE * pipelines);
            }
            Thread.sleep(settleMillis);
            System.out.printf("%nresident memory, %d s after start and %d s after %d full pipelines, MiB: VmRSS (RssAnon: the"
                    + " process's own pages, without the files it maps: libjvm, class archives, which the page cache holds"
                    + " and shares), threads, classes loaded:%n", settleMillis / 1000, settleMillis / 1000, pipelines);
            for (int v = 0; v < n; v++) {
                LocalCluster cluster = clusters.get(v);
                System.out.printf("  variant %d  %-18s %s idle%n", v, "bare JVM", bareIdle[v]);
                System.out.printf("  variant %d  %-18s %s idle, %s after %d Probe calls on each socket%n", v, "gRPC floor",
                        floorIdle[v], Memory.of(idleFloors.get(v).pid()), FLOOR_CALLS_PER_PIPELINE * pipelines);
                System.out.printf("  variant %d  %-18s %s idle, %s after work%n", v, "controller-server", controllerIdle[v],
                        Memory.of(cluster.pid("controller")));
                System.out.printf("  variant %d  %-18s %s idle, %s after work%n", v, "node-server", nodeIdle[v],
                        Memory.of(cluster.pid(NODE)));
            }
            List<String> left = new ArrayList<>();
            for (LocalCluster cluster : clusters) {
                left.addAll(cluster.stopAndListLeftovers());
            }
            System.out.printf("%nleft behind: %s%n", left.isEmpty() ? "nothing" : left);
        } finally {
            clusters.forEach(LocalCluster::close);
            idle.forEach(Process::destroyForcibly);
            idleFloors.forEach(GrpcFloorRun.Running::close);
            LocalCluster.removeTree(floorJar.getParent());
            LocalCluster.removeTree(bare);
        }
    }

    private static List<List<Long>> lists(int n) {
        List<List<Long>> lists = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            lists.add(new ArrayList<>());
        }
        return lists;
    }

    /** A class whose main says it runs and then waits: the JVM and its options, nothing of ours. */
    private static Path bareJvm() throws Exception {
        Path dir = Files.createTempDirectory("strata-bare-jvm-");
        Path source = Files.writeString(dir.resolve("Idle.java"), """
                public class Idle {
                    public static void main(String[] args) throws Exception {
                        System.out.println("ready");
                        Thread.sleep(Long.MAX_VALUE);
                    }
                }
                """);
        int compiled = javax.tools.ToolProvider.getSystemJavaCompiler().run(null, null, null, "-d", dir.toString(), source.toString());
        if (compiled != 0) {
            throw new IllegalStateException("cannot compile " + source);
        }
        return dir;
    }

    private static Process bareProcess(Variant variant, Path classes) throws Exception {
        return new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "@" + variant.jvm().options(), "-cp", classes.toString(), "Idle").redirectErrorStream(true).start();
    }

    private static long bareExecToReady(Variant variant, Path classes) throws Exception {
        long start = System.nanoTime();
        Process process = bareProcess(variant, classes);
        try {
            awaitLine(process, "ready");
            return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        } finally {
            process.destroyForcibly().waitFor();
        }
    }

    private static void awaitLine(Process process, String line) throws Exception {
        BufferedReader out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        for (String read = out.readLine(); read != null; read = out.readLine()) {
            if (read.equals(line)) {
                return;
            }
        }
        throw new IllegalStateException("the bare JVM exited without saying " + line);
    }

    /**
     * VmRSS and RssAnon of a process (KiB), its threads, and the classes its JVM has loaded (jstat
     * reads them from the JVM's performance data file without attaching, so the process measured
     * gains no thread or class from it; -1 where the JDK has no jstat).
     */
    record Memory(long rssKib, long anonKib, long threads, long classes) {

        static Memory of(long pid) throws Exception {
            long rss = -1;
            long anon = -1;
            long threads = -1;
            for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
                if (line.startsWith("VmRSS:")) {
                    rss = number(line);
                } else if (line.startsWith("RssAnon:")) {
                    anon = number(line);
                } else if (line.startsWith("Threads:")) {
                    threads = number(line);
                }
            }
            if (rss < 0 || anon < 0 || threads < 0) {
                throw new IllegalStateException("no VmRSS, RssAnon or Threads for process " + pid);
            }
            return new Memory(rss, anon, threads, loadedClasses(pid));
        }

        private static long number(String line) {
            return Long.parseLong(line.replaceAll("[^0-9]", ""));
        }

        /** jstat -class: a header, then "Loaded Bytes Unloaded Bytes Time". */
        private static long loadedClasses(long pid) throws Exception {
            Path jstat = Path.of(System.getProperty("java.home"), "bin", "jstat");
            if (!Files.isExecutable(jstat)) {
                return -1;
            }
            Process process = new ProcessBuilder(jstat.toString(), "-class", Long.toString(pid)).redirectErrorStream(true).start();
            List<String> lines = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)).lines().toList();
            process.waitFor();
            return lines.size() == 2 ? Long.parseLong(lines.get(1).strip().split("\\s+")[0]) : -1;
        }

        @Override
        public String toString() {
            return String.format("%5.1f (%5.1f) %2d thr %5d cls", rssKib / 1024.0, anonKib / 1024.0, threads, classes);
        }
    }

    private static long median(List<Long> values) {
        List<Long> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        return sorted.get(sorted.size() / 2);
    }
}
