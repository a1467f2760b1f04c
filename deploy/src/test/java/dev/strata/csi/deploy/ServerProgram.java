package dev.strata.csi.deploy;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One of our server programs, run as a child process from the test's class path: the manifests
 * are checked against the flags the program itself declares, not against a copy of the list.
 */
record ServerProgram(String jar, String mainClass) {

    static final List<ServerProgram> ALL = List.of(
            new ServerProgram("controller-server.jar", "dev.strata.csi.controller.ControllerServer"),
            new ServerProgram("node-server.jar", "dev.strata.csi.node.NodeServer"));

    private static final Pattern FLAG_LINE = Pattern.compile("^  --([a-z0-9-]+)\\s*$");
    private static final Pattern ENV = Pattern.compile("env ([A-Z0-9_]+);(?: default \"(.*)\"| (required))?");

    /** What --help declares: the flags, the environment variables, and each flag's env and default. */
    record Usage(Set<String> flags, Set<String> envs, Map<String, Declared> declared) {}

    /** A flag's environment variable, and its default ("" for none) or that it is required. */
    record Declared(String env, String defaultValue, boolean required) {}

    /** The outcome of one run. */
    record Run(int exitCode, String stdout, String stderr) {}

    /** The program a container runs: its first argument names the jar (the image's entrypoint is java -jar). */
    static Optional<ServerProgram> of(Container container) {
        if (container.args().isEmpty()) {
            return Optional.empty();
        }
        String jar = Path.of(container.args().getFirst()).getFileName().toString();
        return ALL.stream().filter(program -> program.jar().equals(jar)).findFirst();
    }

    Usage usage() throws IOException, InterruptedException {
        Run run = run(List.of("--help"));
        if (run.exitCode() != 0) {
            throw new AssertionError(mainClass + " --help exited " + run.exitCode() + ": " + run.stderr());
        }
        Set<String> flags = new LinkedHashSet<>();
        Set<String> envs = new LinkedHashSet<>();
        Map<String, Declared> declared = new LinkedHashMap<>();
        String last = null;
        for (String line : run.stdout().split("\n")) {
            Matcher flag = FLAG_LINE.matcher(line);
            if (flag.matches()) {
                last = flag.group(1);
                flags.add(last);
            }
            Matcher env = ENV.matcher(line);
            if (env.find()) {
                envs.add(env.group(1));
                if (last != null) {
                    declared.put(last, new Declared(env.group(1), env.group(2) == null ? "" : env.group(2), env.group(3) != null));
                }
            }
        }
        if (flags.isEmpty()) {
            throw new AssertionError(mainClass + " --help listed no flags:\n" + run.stdout());
        }
        return new Usage(flags, envs, declared);
    }

    /**
     * Parses {@code args} as the program would, without starting it: --help after them. The
     * program reads flags in order, so an unknown or repeated flag before --help is a usage
     * error (exit 2) and a clean parse prints the usage (exit 0).
     */
    Run parse(List<String> args) throws IOException, InterruptedException {
        List<String> withHelp = new ArrayList<>(args);
        withHelp.add("--help");
        return run(withHelp);
    }

    private Run run(List<String> args) throws IOException, InterruptedException {
        List<String> command = new ArrayList<>(List.of(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp", System.getProperty("java.class.path"), mainClass));
        command.addAll(args);
        Process process = new ProcessBuilder(command).start();
        process.getOutputStream().close();
        // Small outputs: read both after exit would risk nothing, but read concurrently anyway.
        var stderr = new java.util.concurrent.CompletableFuture<String>();
        Thread.ofVirtual().start(() -> {
            try {
                stderr.complete(new String(process.getErrorStream().readAllBytes(), StandardCharsets.UTF_8));
            } catch (IOException e) {
                stderr.completeExceptionally(e);
            }
        });
        String stdout = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new AssertionError(mainClass + " did not exit within 60 s");
        }
        return new Run(process.exitValue(), stdout, stderr.join());
    }
}
