package dev.strata.csi.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

/**
 * A server program started as its own JVM, the way it runs in production, with the test's class
 * path. Its output (stdout and stderr merged) is kept for assertions.
 */
public final class ServerProcess implements AutoCloseable {

    /**
     * How long a server may take to start: 30 s, or STRATA_TEST_START_SECONDS where JVMs start
     * slowly (an emulated VM, hack/nfs-vm.sh, takes about a minute).
     */
    private static final Duration START_TIMEOUT = Duration.ofSeconds(
            Long.parseLong(System.getenv().getOrDefault("STRATA_TEST_START_SECONDS", "30")));

    private final Process process;
    private final List<String> lines = new CopyOnWriteArrayList<>();
    private final Thread reader;

    private ServerProcess(Process process) {
        this.process = process;
        this.reader = Thread.ofPlatform().daemon().start(this::readOutput);
    }

    public static ServerProcess start(Class<?> mainClass, Map<String, String> env, String... args) throws IOException {
        return start(List.of(), mainClass, env, args);
    }

    /** Starts the JVM through {@code launcher}, a command that ends by running the command it is given (unshare, sh -c). */
    public static ServerProcess start(List<String> launcher, Class<?> mainClass, Map<String, String> env, String... args)
            throws IOException {
        List<String> command = new ArrayList<>(launcher);
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("@" + jvmOptions());
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass.getName());
        command.addAll(List.of(args));
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true);
        builder.environment().keySet().removeIf(key -> key.equals("CSI_ENDPOINT") || key.equals("NODE_ID")
                || key.equals("DRIVER_NAME") || key.equals("LOG_VERBOSITY"));
        builder.environment().putAll(env);
        return new ServerProcess(builder.start());
    }

    public static ServerProcess start(Class<?> mainClass, String... args) throws IOException {
        return start(mainClass, Map.of(), args);
    }

    /** The JVM options the servers ship with (deploy/jvm.options), found from the module directory. */
    private static Path jvmOptions() {
        for (Path dir = Path.of(System.getProperty("user.dir")).toAbsolutePath(); dir != null; dir = dir.getParent()) {
            Path options = dir.resolve("deploy/jvm.options");
            if (Files.isRegularFile(options)) {
                return options;
            }
        }
        throw new IllegalStateException("deploy/jvm.options not found above " + System.getProperty("user.dir"));
    }

    private void readOutput() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                lines.add(line);
            }
        } catch (IOException ignored) {
            // the process is gone
        }
    }

    /**
     * Waits until the server logs that it listens on {@code socket} (in either log format), or fails
     * with what it printed. The line must name the socket: a server listens on TCP too (node-server's
     * agent, controller-server's registry) before its CSI socket, and after a restart the socket file
     * the killed process left is there before the new one binds it.
     */
    public ServerProcess awaitListening(Path socket) throws InterruptedException {
        String endpoint = "unix://" + socket.toAbsolutePath().normalize();
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        while (System.nanoTime() < deadline) {
            if (Files.exists(socket) && output().lines().anyMatch(line -> line.contains(endpoint)
                    && (line.contains("msg=listening") || line.contains("\"msg\":\"listening\"")))) {
                return this;
            }
            if (!process.isAlive()) {
                throw new AssertionError("server exited with " + process.exitValue() + ":\n" + output());
            }
            Thread.sleep(20);
        }
        throw new AssertionError("server did not listen on " + socket + " within " + START_TIMEOUT.toSeconds() + "s:\n" + output());
    }

    /** Waits until a line containing {@code text} appears. */
    public void awaitOutput(String text) throws InterruptedException {
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        while (System.nanoTime() < deadline) {
            if (output().contains(text)) {
                return;
            }
            Thread.sleep(20);
        }
        throw new AssertionError("no output containing '" + text + "' within " + START_TIMEOUT.toSeconds() + "s:\n" + output());
    }

    /** Waits until the output matches {@code pattern}. */
    public void awaitOutputMatching(java.util.regex.Pattern pattern) throws InterruptedException {
        long deadline = System.nanoTime() + START_TIMEOUT.toNanos();
        while (System.nanoTime() < deadline) {
            if (pattern.matcher(output()).find()) {
                return;
            }
            Thread.sleep(20);
        }
        throw new AssertionError("no output matching '" + pattern + "' within " + START_TIMEOUT.toSeconds() + "s:\n" + output());
    }

    /**
     * Sends SIGTERM, as kubelet does when it stops a container. Through the process handle:
     * {@link Process#destroy()} would also close the pipes and lose what the server logs while stopping.
     */
    public void terminate() {
        process.toHandle().destroy();
    }

    /** Waits for the exit and returns its code; all output has been read by then. */
    public int exitCode() throws InterruptedException {
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            throw new AssertionError("server still running after 60s:\n" + output());
        }
        reader.join(5_000);
        return process.exitValue();
    }

    public long pid() {
        return process.pid();
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    public String output() {
        return String.join("\n", lines);
    }

    /** Kills the process (SIGKILL: no chance to clean up) and waits for it. */
    @Override
    public void close() {
        if (process.isAlive()) {
            process.destroyForcibly();
            try {
                process.waitFor(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
