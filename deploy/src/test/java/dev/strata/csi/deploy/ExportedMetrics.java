package dev.strata.csi.deploy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The metric names the servers' code registers ({@code .name("strata_...")} on a Prometheus
 * builder), read from their sources, so that a renamed metric breaks the alert rules' test
 * instead of silently stopping an alert.
 */
final class ExportedMetrics {

    private static final Pattern NAME = Pattern.compile("\\.name\\(\"((?:strata|csi_plugin)_[a-z0-9_]+)\"\\)");

    private ExportedMetrics() {}

    static Set<String> fromSources(Path deployDir) throws IOException {
        Set<String> names = new TreeSet<>();
        for (String module : new String[] {"csi-runtime", "controller-server", "node-server"}) {
            try (Stream<Path> files = Files.walk(deployDir.toAbsolutePath().getParent().resolve(module + "/src/main/java"))) {
                for (Path file : files.filter(f -> f.toString().endsWith(".java")).toList()) {
                    Matcher name = NAME.matcher(Files.readString(file));
                    while (name.find()) {
                        names.add(name.group(1));
                    }
                }
            }
        }
        return names;
    }
}
