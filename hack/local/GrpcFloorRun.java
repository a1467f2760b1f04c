import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.spi.ToolProvider;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * GrpcFloor, hack/footprint.sh's second baseline, run in one variant's JVM: with that JVM's
 * options, and with an AOT cache of its own trained here when the variant's servers have theirs,
 * so that the floor gets what the servers get.
 */
record GrpcFloorRun(Path jar, Path repo, LocalCluster.Jvm jvm, Path cache) {

    private static final int TRAINING_CALLS = 200;

    /**
     * GrpcFloor compiled against the repository's node-server libraries, in a jar (an AOT cache
     * takes jars only), in a directory of its own that also holds the caches and sockets of the
     * runs: the caller removes {@code jar.getParent()} when done.
     */
    static Path build(Path repo) throws Exception {
        Path dir = Files.createTempDirectory("strata-grpc-floor-");
        Path classes = Files.createDirectories(dir.resolve("classes"));
        Path source = repo.resolve("hack/local/GrpcFloor.java");
        int compiled = javax.tools.ToolProvider.getSystemJavaCompiler().run(null, null, null,
                "-cp", libraries(repo), "-d", classes.toString(), source.toString());
        if (compiled != 0) {
            throw new IllegalStateException("cannot compile " + source);
        }
        Path jar = dir.resolve("grpc-floor.jar");
        int packed = ToolProvider.findFirst("jar").orElseThrow()
                .run(System.out, System.err, "--create", "--file", jar.toString(), "-C", classes.toString(), ".");
        if (packed != 0) {
            throw new IllegalStateException("cannot write " + jar);
        }
        return jar;
    }

    /** The floor for {@code jvm}, its AOT cache trained first when the JVM's servers use theirs. */
    static GrpcFloorRun trained(Path jar, Path repo, LocalCluster.Jvm jvm) throws Exception {
        if (jvm.aotDir() == null || !LocalCluster.Jvm.aotSupported()) {
            return new GrpcFloorRun(jar, repo, jvm, null);
        }
        Path run = Files.createTempDirectory(jar.getParent(), "training-");
        Path cache = run.resolve("grpc-floor.aot");
        Process training = new ProcessBuilder(command(jar, repo, jvm, "-XX:AOTCacheOutput=" + cache, run.resolve("floor.sock")))
                .redirectErrorStream(true).start();
        try (Running running = new Running(training)) {
            running.awaitLine("ready");
            running.work(TRAINING_CALLS);
        }
        if (training.exitValue() != 0 || !Files.isRegularFile(cache)) {
            throw new IllegalStateException("the floor's AOT training failed (exit " + training.exitValue() + ")");
        }
        return new GrpcFloorRun(jar, repo, jvm, cache);
    }

    Running start() throws Exception {
        Path socket = Files.createTempDirectory(jar.getParent(), "run-").resolve("floor.sock");
        Running running = new Running(new ProcessBuilder(command(jar, repo, jvm, cache == null ? null : "-XX:AOTCache=" + cache, socket))
                .redirectErrorStream(true).start());
        running.awaitLine("ready");
        return running;
    }

    long execToReadyMillis() throws Exception {
        long start = System.nanoTime();
        try (Running running = start()) {
            return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        }
    }

    private static List<String> command(Path jar, Path repo, LocalCluster.Jvm jvm, String aot, Path socket) throws IOException {
        List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "@" + jvm.options()));
        if (aot != null) {
            command.add(aot);
        }
        command.addAll(List.of("-cp", jar + ":" + libraries(repo), "GrpcFloor", socket.toString()));
        return command;
    }

    /** node-server's libraries, named one by one in a fixed order: an AOT cache checks the class path it was made with. */
    private static String libraries(Path repo) throws IOException {
        try (Stream<Path> jars = Files.list(repo.resolve("node-server/target/lib"))) {
            return jars.map(Path::toString).filter(name -> name.endsWith(".jar")).sorted().collect(Collectors.joining(":"));
        }
    }

    /** A started floor: "work N" on its stdin, "done" back; closing its stdin stops it. */
    static final class Running implements AutoCloseable {

        private final Process process;
        private final BufferedReader out;
        private final Writer in;

        Running(Process process) {
            this.process = process;
            this.out = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
            this.in = new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8);
        }

        long pid() {
            return process.pid();
        }

        void work(int calls) throws Exception {
            in.write("work " + calls + "\n");
            in.flush();
            awaitLine("done");
        }

        private void awaitLine(String line) throws IOException {
            for (String read = out.readLine(); read != null; read = out.readLine()) {
                if (read.equals(line)) {
                    return;
                }
            }
            throw new IllegalStateException("the gRPC floor exited without saying " + line);
        }

        /** Closes stdin and waits for the floor to stop (a training run writes its AOT cache then). */
        @Override
        public void close() {
            try {
                in.close();
                out.transferTo(Writer.nullWriter());
                if (!process.waitFor(300, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                }
            } catch (IOException | InterruptedException e) {
                process.destroyForcibly();
            }
        }
    }
}
