import csi.v1.Csi.ProbeRequest;
import csi.v1.IdentityGrpc;
import io.grpc.ManagedChannel;
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
 * What each server costs on a node, beside a bare JVM with the same options (deploy/jvm.options)
 * measured in the same run: resident memory idle and after a fixed workload (full pipelines), and
 * the time from exec to ready (Probe answers ready; for the bare JVM, its main method runs),
 * median of several starts. Run by hack/footprint.sh.
 */
final class Footprint {

    private static final String NODE = "node-a";

    public static void main(String[] args) throws Exception {
        Path repo = Path.of(args[0]);
        int starts = args.length > 1 ? Integer.parseInt(args[1]) : 5;
        int pipelines = args.length > 2 ? Integer.parseInt(args[2]) : 20;
        long settleMillis = args.length > 3 ? Long.parseLong(args[3]) : 10_000;
        Path bare = bareJvm();

        System.out.printf("exec to ready, median of %d starts:%n", starts);
        List<Long> bareStarts = new ArrayList<>();
        List<Long> controllerStarts = new ArrayList<>();
        List<Long> nodeStarts = new ArrayList<>();
        for (int i = 0; i < starts; i++) {
            bareStarts.add(bareExecToReady(repo, bare));
            try (LocalCluster cluster = LocalCluster.start(repo, NODE)) {
                controllerStarts.add(cluster.execToReadyMillis("controller"));
                nodeStarts.add(cluster.execToReadyMillis(NODE));
                cluster.stopAndListLeftovers();
            }
        }
        System.out.printf("  %-18s %6d ms%n  %-18s %6d ms%n  %-18s %6d ms%n", "bare JVM", median(bareStarts),
                "controller-server", median(controllerStarts), "node-server", median(nodeStarts));

        Process idle = bareProcess(repo, bare);
        try (LocalCluster cluster = LocalCluster.start(repo, NODE)) {
            awaitLine(idle, "ready");
            Thread.sleep(settleMillis);
            long bareRss = rssKib(idle.pid());
            long controllerIdle = rssKib(cluster.pid("controller"));
            long nodeIdle = rssKib(cluster.pid(NODE));
            for (int i = 0; i < pipelines; i++) {
                Bench.driverPipeline(cluster, "footprint-" + i, new Bench.Samples());
            }
            Thread.sleep(settleMillis);
            long controllerWorked = rssKib(cluster.pid("controller"));
            long nodeWorked = rssKib(cluster.pid(NODE));
            System.out.printf("%nresident memory (VmRSS), %d s after start and %d s after %d full pipelines:%n",
                    settleMillis / 1000, settleMillis / 1000, pipelines);
            System.out.printf("  %-18s %6.1f MiB idle%n", "bare JVM", bareRss / 1024.0);
            System.out.printf("  %-18s %6.1f MiB idle, %6.1f MiB after work%n", "controller-server", controllerIdle / 1024.0,
                    controllerWorked / 1024.0);
            System.out.printf("  %-18s %6.1f MiB idle, %6.1f MiB after work%n", "node-server", nodeIdle / 1024.0, nodeWorked / 1024.0);
            List<String> left = cluster.stopAndListLeftovers();
            System.out.printf("%nleft behind: %s%n", left.isEmpty() ? "nothing" : left);
        } finally {
            idle.destroyForcibly();
        }
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

    private static Process bareProcess(Path repo, Path classes) throws Exception {
        return new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "@" + repo.resolve("deploy/jvm.options"), "-cp", classes.toString(), "Idle").redirectErrorStream(true).start();
    }

    private static long bareExecToReady(Path repo, Path classes) throws Exception {
        long start = System.nanoTime();
        Process process = bareProcess(repo, classes);
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

    static long rssKib(long pid) throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.replaceAll("[^0-9]", ""));
            }
        }
        throw new IllegalStateException("no VmRSS for process " + pid);
    }

    private static long median(List<Long> values) {
        List<Long> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        return sorted.get(sorted.size() / 2);
    }
}
