import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Trains the servers' AOT caches (JDK 25 and later) on a real run: controller-server and a
 * node-server started with deploy/jvm.options and -XX:AOTCacheOutput, full pipelines driven
 * through them, then SIGTERM; each JVM writes {@code <program>.aot} as it exits. Run by
 * hack/aot-cache.sh; LocalCluster (demo, benchmarks) then starts the servers with the caches.
 * Arguments: the repository, the caches' directory, the number of pipelines, and optionally another
 * options file than deploy/jvm.options (a cache only serves a JVM started with matching options).
 */
final class AotTraining {

    public static void main(String[] args) throws Exception {
        Path repo = Path.of(args[0]);
        Path caches = Path.of(args[1]);
        int pipelines = args.length > 2 ? Integer.parseInt(args[2]) : 5;
        Path options = args.length > 3 ? Path.of(args[3]) : repo.resolve("deploy/jvm.options");
        Files.createDirectories(caches);
        LocalCluster.Jvm training = new LocalCluster.Jvm(options, caches, true);
        Path work;
        try (LocalCluster cluster = LocalCluster.start(repo, training, "node-a")) {
            work = cluster.work;
            for (int i = 0; i < pipelines; i++) {
                Bench.driverPipeline(cluster, "training-" + i, new Bench.Samples());
            }
            List<String> left = cluster.stopAndListLeftovers();
            if (!left.isEmpty()) {
                throw new IllegalStateException("the training run left " + left + "; see the servers' logs in " + work);
            }
        }
        for (String program : List.of("controller-server", "node-server")) {
            if (!Files.isRegularFile(caches.resolve(program + ".aot"))) {
                throw new IllegalStateException("no AOT cache written for " + program + "; see the servers' logs in " + work);
            }
        }
        // A clean run's work directory (logs, token, empty pools) is of no further use: nothing is left in /tmp.
        LocalCluster.removeTree(work);
    }
}
