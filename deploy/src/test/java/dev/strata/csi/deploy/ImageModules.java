package dev.strata.csi.deploy;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.module.ModuleDescriptor;
import java.lang.module.ModuleFinder;
import java.lang.module.ModuleReference;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.spi.ToolProvider;
import java.util.stream.Stream;

/**
 * The Java modules of the image's runtime against those the servers' code needs. The list is
 * hack/java-modules, which hack/base-image.sh gives jlink; what the code needs is what jdeps finds
 * in the servers' jars and every jar of their lib/ directory, as the image carries them.
 */
final class ImageModules {

    private ImageModules() {}

    /** The modules hack/java-modules names (a line each; '#' starts a comment). */
    static Set<String> listed(Path file) throws IOException {
        Set<String> modules = new TreeSet<>();
        for (String line : Files.readAllLines(file)) {
            String module = line.strip();
            if (!module.isEmpty() && !module.startsWith("#")) {
                modules.add(module);
            }
        }
        return modules;
    }

    /** The JDK modules jdeps finds the {@code jars} use (its reduced list: a module another one requires may be left out). */
    static Set<String> needed(List<Path> jars) {
        ToolProvider jdeps = ToolProvider.findFirst("jdeps").orElseThrow(() -> new IllegalStateException("this JDK has no jdeps"));
        List<String> args = new ArrayList<>(List.of("--multi-release", Integer.toString(Runtime.version().feature()),
                "--ignore-missing-deps", "--print-module-deps"));
        jars.forEach(jar -> args.add(jar.toString()));
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int status = jdeps.run(new PrintWriter(out), new PrintWriter(err), args.toArray(String[]::new));
        if (status != 0) {
            throw new IllegalStateException("jdeps " + String.join(" ", args) + " failed (" + status + "): " + err + out);
        }
        String last = out.toString().strip().lines().reduce((first, second) -> second).orElse("");
        return new TreeSet<>(Arrays.asList(last.split(",")));
    }

    /**
     * The modules of {@code needed} that a runtime linked from {@code listed} lacks. jlink adds
     * what the listed modules require, so a module one of them requires is there too.
     */
    static List<String> missing(Set<String> listed, Set<String> needed) {
        Set<String> linked = new TreeSet<>();
        Deque<String> toVisit = new ArrayDeque<>(listed);
        ModuleFinder system = ModuleFinder.ofSystem();
        while (!toVisit.isEmpty()) {
            String name = toVisit.pop();
            if (linked.add(name)) {
                system.find(name).map(ModuleReference::descriptor).stream()
                        .flatMap(descriptor -> descriptor.requires().stream())
                        .filter(requires -> !requires.modifiers().contains(ModuleDescriptor.Requires.Modifier.STATIC))
                        .forEach(requires -> toVisit.push(requires.name()));
            }
        }
        return needed.stream().filter(module -> !linked.contains(module)).toList();
    }

    /** The jars the image carries, as the build leaves them (Dockerfile: the two servers' jars and node-server/target/lib/). */
    static List<Path> imageJars(Path repository) throws IOException {
        List<Path> jars = new ArrayList<>(List.of(repository.resolve("controller-server/target/controller-server.jar"),
                repository.resolve("node-server/target/node-server.jar")));
        Path lib = repository.resolve("node-server/target/lib");
        if (Files.isDirectory(lib)) {
            try (Stream<Path> files = Files.list(lib)) {
                files.filter(file -> file.toString().endsWith(".jar")).sorted().forEach(jars::add);
            }
        }
        for (Path jar : jars.subList(0, 2)) {
            if (!Files.isRegularFile(jar)) {
                throw new IllegalStateException(jar + " is not built: the servers are packaged before the deploy module is tested "
                        + "(mvn verify from the repository's root)");
            }
        }
        if (!Files.isDirectory(lib)) {
            throw new IllegalStateException(lib + " is not there: node-server's package phase copies the libraries into it");
        }
        return jars;
    }
}
