package dev.strata.csi.deploy;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The figures the docs state whose source is a manifest, the Dockerfile or a program: each stated
 * in one table, and each check here compares that table with its source. Every check takes the
 * doc's lines and the source as values, so that a test can hand it a broken copy of either.
 */
final class DocFacts {

    /** The table of each container's resources and probes (docs/install.md). */
    static final String CONTAINERS = "| pod | container | CPU request | memory request | memory limit | liveness probe | readiness probe |";
    /** The table of the image's packages (docs/install.md). */
    static final String PACKAGES = "| package | what node-server runs from it |";
    /** The table of the pinned sidecars (docs/install.md). */
    static final String SIDECARS = "| sidecar | pinned | minimum Kubernetes (documented) | what sets it |";
    /** The pods of the shipped manifests, as the containers' table names them. */
    private static final Map<String, String> PODS = Map.of("Deployment/strata-controller", "controller", "DaemonSet/strata-node", "node");
    private static final String SIDECAR_REGISTRY = "registry.k8s.io/sig-storage/";
    /** A sidecar named with a release, by its image's name or its project's (external-provisioner). */
    private static final Pattern SIDECAR_RELEASE = Pattern.compile(
            "\\b(?:csi-|external-)?(provisioner|attacher|resizer|snapshotter|node-driver-registrar|livenessprobe)(?: release)? (v\\d+\\.\\d+\\.\\d+)");
    /** A minimum Kubernetes version stated as such. */
    private static final Pattern MINIMUM_KUBERNETES = Pattern.compile("Kubernetes \\**1\\.\\d+ or newer");

    private DocFacts() {}

    /** The rows of the Markdown table whose header row is {@code header} (cells stripped), in order. */
    static List<List<String>> table(List<String> lines, String header) {
        int start = -1;
        for (int i = 0; i < lines.size(); i++) {
            if (lines.get(i).strip().equals(header)) {
                start = i;
                break;
            }
        }
        if (start < 0) {
            throw new AssertionError("no table " + header);
        }
        List<List<String>> rows = new ArrayList<>();
        for (String line : lines.subList(start + 2, lines.size())) {
            String row = line.strip();
            if (!row.startsWith("|")) {
                break;
            }
            List<String> cells = new ArrayList<>();
            for (String cell : row.substring(1, row.length() - 1).split("\\|")) {
                cells.add(cell.strip());
            }
            rows.add(cells);
        }
        return rows;
    }

    /** Each container's resources and probes in {@code install} (docs/install.md) against the pods of the manifests. */
    static List<String> containers(List<String> install, Manifests manifests) {
        List<List<String>> expected = new ArrayList<>();
        for (PodTemplate pod : manifests.pods()) {
            String name = PODS.get(pod.owner().kind() + "/" + pod.owner().name());
            if (name == null) {
                continue;
            }
            for (Container container : pod.containers()) {
                expected.add(List.of(name, container.name(), String.valueOf(Tree.at(container.body(), "resources", "requests", "cpu")),
                        String.valueOf(Tree.at(container.body(), "resources", "requests", "memory")),
                        String.valueOf(Tree.at(container.body(), "resources", "limits", "memory")),
                        probe(container, "livenessProbe"), probe(container, "readinessProbe")));
            }
        }
        return differences("docs/install.md's containers (resources, probes) against deploy/", table(install, CONTAINERS), expected);
    }

    /** A probe as the table writes it: `:port/path` of its httpGet, or none. */
    private static String probe(Container container, String kind) {
        Object port = Tree.at(container.body(), kind, "httpGet", "port");
        if (port == null) {
            return Tree.at(container.body(), kind) == null ? "none" : kind + " that is not httpGet";
        }
        Object number = port instanceof Integer ? port : container.ports().get(String.valueOf(port));
        return "`:" + number + Tree.at(container.body(), kind, "httpGet", "path") + "`";
    }

    /** The packages of docs/install.md's table against those the Dockerfile installs. */
    static List<String> packages(List<String> install, String dockerfile) {
        Matcher installed = Pattern.compile("apt-get install -y --no-install-recommends((?:\\s|\\\\)+(?:[a-z0-9.+-]+(?:\\s|\\\\)+)+)&&")
                .matcher(dockerfile);
        if (!installed.find()) {
            return List.of("the Dockerfile has no apt-get install line");
        }
        Set<String> packages = new TreeSet<>(List.of(installed.group(1).replace("\\", " ").strip().split("\\s+")));
        Set<String> documented = new TreeSet<>();
        table(install, PACKAGES).forEach(row -> documented.add(row.getFirst().replace("`", "")));
        return differences("docs/install.md's packages against the Dockerfile's",
                documented.stream().map(List::of).toList(), packages.stream().map(List::of).toList());
    }

    /**
     * docs/install.md's sidecar table against the sidecar images the manifests pin, and every
     * sidecar release a page names ({@code pages}: name to lines) against the pinned one.
     */
    static List<String> sidecars(List<String> install, Manifests manifests, Map<String, List<String>> pages) {
        Map<String, String> pinned = new TreeMap<>();
        for (PodTemplate pod : manifests.pods()) {
            for (Container container : pod.containers()) {
                if (container.imageRepository().startsWith(SIDECAR_REGISTRY)) {
                    pinned.put(container.imageRepository().substring(SIDECAR_REGISTRY.length()), container.imageTag());
                }
            }
        }
        Map<String, String> documented = new TreeMap<>();
        table(install, SIDECARS).forEach(row -> documented.put(row.get(0), row.get(1)));
        List<String> problems = new ArrayList<>();
        if (!documented.equals(pinned)) {
            problems.add("docs/install.md's sidecars " + documented + ", deploy/ pins " + pinned);
        }
        pages.forEach((page, lines) -> {
            Matcher release = SIDECAR_RELEASE.matcher(String.join(" ", lines).replaceAll("\\s+", " "));
            while (release.find()) {
                String image = pinned.keySet().stream().filter(name -> name.endsWith(release.group(1))).findFirst().orElse("?");
                if (!release.group(2).equals(pinned.get(image))) {
                    problems.add(page + ": '" + release.group() + "', deploy/ pins " + image + ":" + pinned.get(image));
                }
            }
        });
        return problems;
    }

    /** The pages other than {@code home} that state a minimum Kubernetes version: one place only. */
    static List<String> minimumKubernetesStatedOnce(String home, Map<String, List<String>> pages) {
        List<String> problems = new ArrayList<>();
        pages.forEach((page, lines) -> {
            Matcher stated = MINIMUM_KUBERNETES.matcher(String.join(" ", lines).replaceAll("\\s+", " "));
            if (!page.equals(home) && stated.find()) {
                problems.add(page + " states '" + stated.group() + "': link " + home + " instead");
            }
        });
        return problems;
    }

    /**
     * The env and default columns of docs/parameters.md's flag table ({@code rows}) against what
     * each program's --help declares: a default as its first code span, "required" for a required
     * flag, and no code span first for a flag without one ("empty (off)", "none").
     */
    static List<String> flagDefaults(List<String> rows, Map<String, ServerProgram.Usage> programs) {
        List<String> problems = new ArrayList<>();
        for (String row : rows) {
            String[] cells = row.split("\\|");
            if (cells.length < 6 || !cells[1].strip().startsWith("`--")) {
                continue;
            }
            String flag = cells[1].strip().replace("`", "").substring(2);
            String env = cells[2].strip().replace("`", "");
            String documented = cells[3].strip();
            Map<String, ServerProgram.Declared> declared = new LinkedHashMap<>();
            programs.forEach((program, usage) -> {
                if (usage.declared().containsKey(flag)) {
                    declared.put(program, usage.declared().get(flag));
                }
            });
            declared.forEach((program, declaration) -> {
                if (!env.equals(declaration.env())) {
                    problems.add("--" + flag + ": env " + env + " documented, " + program + " reads " + declaration.env());
                }
                boolean agrees = declaration.required() ? documented.startsWith("required")
                        : declaration.defaultValue().isEmpty() ? !documented.startsWith("`")
                        : documented.startsWith("`" + declaration.defaultValue() + "`");
                if (!agrees) {
                    problems.add("--" + flag + ": default '" + documented + "' documented, " + program + " declares "
                            + (declaration.required() ? "it required" : "'" + declaration.defaultValue() + "'"));
                }
            });
        }
        return problems;
    }

    /** The metrics the servers export that none of {@code pages} (the metric tables) names in code. */
    static List<String> undocumentedMetrics(Set<String> exported, Map<String, List<String>> pages) {
        String text = String.join(" ", pages.values().stream().flatMap(List::stream).toList());
        return exported.stream().filter(metric -> !text.contains("`" + metric + "`") && !text.contains("`" + metric + "{"))
                .map(metric -> metric + " is exported but in no metrics table of " + pages.keySet()).toList();
    }

    private static List<String> differences(String what, List<List<String>> documented, List<List<String>> source) {
        List<String> problems = new ArrayList<>();
        for (List<String> row : documented) {
            if (!source.contains(row)) {
                problems.add(what + ": documented " + row + ", not in the source");
            }
        }
        for (List<String> row : source) {
            if (!documented.contains(row)) {
                problems.add(what + ": " + row + " is not documented");
            }
        }
        return problems;
    }
}
