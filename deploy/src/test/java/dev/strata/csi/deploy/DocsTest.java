package dev.strata.csi.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.backend.ParameterKeys;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.backend.nfs.NfsParameters;
import dev.strata.csi.controller.local.LocalCrashPoint;
import dev.strata.csi.controller.nfs.NfsCrashPoint;
import dev.strata.csi.node.local.CrashPoint;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The documentation against the repository and the programs: every relative link of the README and
 * docs/ resolves (file and heading), docs/parameters.md lists exactly the flags each server's
 * --help declares, and exactly the StorageClass keys an administrator may set for each backend
 * (the ParameterKeys the backends check requests with); and each figure whose source is a manifest,
 * the Dockerfile or a program is stated in one table that agrees with it ({@link DocFacts}): each
 * container's resources and probes, the image's packages, the sidecars' releases, the flags'
 * defaults, the minimum Kubernetes version. Each of those checks is also run on a copy of the
 * source or the doc changed as an edit would change it, and must complain.
 */
class DocsTest {

    private static final Path REPO = Manifests.defaultDir().toAbsolutePath().normalize().getParent();
    private static final Path PARAMETERS = REPO.resolve("docs/parameters.md");
    private static final Path INSTALL = REPO.resolve("docs/install.md");
    /** A Markdown link or image: [text](target). */
    private static final Pattern LINK = Pattern.compile("\\]\\(([^)\\s]+)\\)");
    private static final Pattern TABLE_CODE_CELL = Pattern.compile("^\\|\\s*`([^`]+)`");
    /** Printed by --help on the line with their description, so ServerProgram.Usage leaves them out. */
    private static final Set<String> ALWAYS = Set.of("help", "version");

    @Test
    void everyRelativeLinkResolvesToAFileAndAHeading() throws IOException {
        List<Path> pages = pages();
        assertTrue(pages.contains(REPO.resolve("README.md")) && pages.contains(PARAMETERS), pages.toString());
        List<String> broken = new ArrayList<>();
        for (Path page : pages) {
            for (String target : links(page)) {
                brokenLink(page, target).ifPresent(broken::add);
            }
        }
        assertEquals(List.of(), broken, "links that lead nowhere");
    }

    @Test
    void aBrokenLinkOrHeadingIsFound(@TempDir Path dir) throws IOException {
        Path page = Files.writeString(dir.resolve("page.md"), "# A page\n\n## Some Section: here\n");
        assertEquals(Optional.empty(), brokenLink(page, "page.md#some-section-here"));
        assertEquals(Optional.empty(), brokenLink(page, "#a-page"));
        assertTrue(brokenLink(page, "page.md#some-other-section").isPresent());
        assertTrue(brokenLink(page, "missing.md").isPresent());
        assertEquals(List.of("page.md#a-page"), links(Files.writeString(dir.resolve("links.md"),
                "[a](page.md#a-page) `[b](in-code.md)`\n```\n[c](in-a-block.md)\n```\n[d](https://example.com)\n")));
    }

    @Test
    void parametersListEveryFlagOfEachServerAndNoOther() throws Exception {
        Map<String, Set<String>> documented = documentedFlags();
        for (ServerProgram program : ServerProgram.ALL) {
            String name = program.jar().replace(".jar", "");
            Set<String> flags = new TreeSet<>(documented.getOrDefault(name, Set.of()));
            assertTrue(flags.containsAll(ALWAYS), name + ": " + flags);
            flags.removeAll(ALWAYS);
            assertEquals(new TreeSet<>(program.usage().flags()), flags, name + "'s flags in docs/parameters.md against its --help");
        }
    }

    @Test
    void parametersListEveryStorageClassKeyEachBackendTakesAndNoOther() throws Exception {
        Map<String, ParameterKeys> backends = Map.of("local-disk", LocalParameters.STORAGE_CLASS, "nfs", NfsParameters.STORAGE_CLASS);
        for (var backend : backends.entrySet()) {
            Set<String> documented = new TreeSet<>(firstColumnCodes(section("## StorageClass: " + backend.getKey())));
            documented.removeIf(key -> key.startsWith("csi.storage.k8s.io/")); // Kubernetes' own, listed under their own heading
            assertEquals(new TreeSet<>(backend.getValue().administrator()), documented,
                    backend.getKey() + " StorageClass keys in docs/parameters.md");
        }
    }

    @Test
    void parametersListEveryVolumeAttributesClassKeyAndNoOther() throws Exception {
        Set<String> documented = new TreeSet<>(firstColumnCodes(section("## VolumeAttributesClass")));
        documented.removeIf(key -> key.startsWith("csi.storage.k8s.io/"));
        assertEquals(new TreeSet<>(LocalParameters.ATTRIBUTES_CLASS.administrator()), documented,
                "VolumeAttributesClass keys in docs/parameters.md (local volumes take them, NFS none)");
    }

    @Test
    void parametersListEveryVolumeSnapshotClassKeyAndNoOther() throws Exception {
        Set<String> documented = new TreeSet<>(firstColumnCodes(section("## VolumeSnapshotClass")));
        documented.removeIf(key -> key.startsWith("csi.storage.k8s.io/"));
        assertEquals(new TreeSet<>(LocalParameters.SNAPSHOT_CLASS.administrator()), documented,
                "VolumeSnapshotClass keys in docs/parameters.md (local snapshots take copies, NFS none)");
        assertEquals(Set.of(), NfsParameters.SNAPSHOT_CLASS.administrator());
    }

    @Test
    void installStatesEachContainersResourcesAndProbesAsTheManifestsDo() throws Exception {
        List<String> install = Files.readAllLines(INSTALL);
        assertEquals(List.of(), DocFacts.containers(install, Manifests.load(Manifests.defaultDir())));
        // The manifest changed: a server's request (the docs once said 160 MiB), a sidecar's probe dropped.
        Manifests changed = Manifests.load(Manifests.defaultDir());
        Tree.map(container(changed, "Deployment", "strata-controller", "controller-server").body(), "resources", "requests")
                .put("memory", "160Mi");
        container(changed, "Deployment", "strata-controller", "csi-resizer").body().remove("livenessProbe");
        assertEquals(4, DocFacts.containers(install, changed).size(), DocFacts.containers(install, changed).toString());
        // The doc changed: a limit, and a row left out.
        List<String> edited = replaced(install, "| node | node-server | 10m | 112Mi | 320Mi |", "| node | node-server | 10m | 112Mi | 256Mi |");
        assertEquals(2, DocFacts.containers(edited, Manifests.load(Manifests.defaultDir())).size());
        edited = new ArrayList<>(install);
        edited.removeIf(line -> line.contains("| controller | csi-attacher |"));
        assertEquals(1, DocFacts.containers(edited, Manifests.load(Manifests.defaultDir())).size());
    }

    @Test
    void installListsThePackagesTheDockerfileInstalls() throws Exception {
        List<String> install = Files.readAllLines(INSTALL);
        String dockerfile = Files.readString(REPO.resolve("Dockerfile"));
        assertEquals(List.of(), DocFacts.packages(install, dockerfile));
        assertEquals(1, DocFacts.packages(install, dockerfile.replace(" cryptsetup-bin ", " ")).size());
        assertEquals(1, DocFacts.packages(install, dockerfile.replace(" lvm2 ", " lvm2 dmsetup ")).size());
        List<String> edited = new ArrayList<>(install);
        edited.removeIf(line -> line.startsWith("| `thin-provisioning-tools` |"));
        assertEquals(1, DocFacts.packages(edited, dockerfile).size());
    }

    @Test
    void everySidecarReleaseTheDocsNameIsTheOneDeployPins() throws Exception {
        List<String> install = Files.readAllLines(INSTALL);
        Map<String, List<String>> pages = pageLines();
        assertEquals(List.of(), DocFacts.sidecars(install, Manifests.load(Manifests.defaultDir()), pages));
        Manifests bumped = Manifests.load(Manifests.defaultDir());
        Map<String, Object> resizer = container(bumped, "Deployment", "strata-controller", "csi-resizer").body();
        resizer.put("image", "registry.k8s.io/sig-storage/csi-resizer:v2.3.0");
        assertEquals(1, DocFacts.sidecars(install, bumped, pages).size());
        pages.put("docs/other.md", List.of("The lists below are what external-provisioner v6.2.0 sends,", "and csi-attacher",
                "v4.12.0 attaches."));
        assertEquals(List.of("docs/other.md: 'external-provisioner v6.2.0', deploy/ pins csi-provisioner:v6.3.0"),
                DocFacts.sidecars(install, Manifests.load(Manifests.defaultDir()), pages));
    }

    @Test
    void theMinimumKubernetesVersionIsStatedInInstallOnly() throws Exception {
        Map<String, List<String>> pages = pageLines();
        assertEquals(List.of(), DocFacts.minimumKubernetesStatedOnce("docs/install.md", pages));
        assertTrue(String.join(" ", pages.get("docs/install.md")).contains("Kubernetes **1.30 or newer**"));
        pages.put("README.md", List.of("You need Kubernetes 1.34 or", "newer, kubectl."));
        assertEquals(1, DocFacts.minimumKubernetesStatedOnce("docs/install.md", pages).size());
    }

    @Test
    void parametersGiveEachFlagsEnvAndDefaultAsItsProgramDeclares() throws Exception {
        Map<String, ServerProgram.Usage> programs = new LinkedHashMap<>();
        for (ServerProgram program : ServerProgram.ALL) {
            programs.put(program.jar(), program.usage());
        }
        assertTrue(programs.values().stream().allMatch(usage -> usage.declared().containsKey("endpoint")), programs.toString());
        List<String> flags = section("## Server flags");
        assertEquals(List.of(), DocFacts.flagDefaults(flags, programs));
        // A changed default, a required flag given one, a flag without one given one, another env.
        assertEquals(2, DocFacts.flagDefaults(replaced(flags, "| `SHUTDOWN_GRACE` | `30s` |", "| `SHUTDOWN_GRACE` | `60s` |"), programs).size());
        assertEquals(1, DocFacts.flagDefaults(replaced(flags, "| `NODE_ID` | required |", "| `NODE_ID` | `node-a` |"), programs).size());
        assertEquals(1, DocFacts.flagDefaults(replaced(flags, "| `VOLUME_GROUP` | empty (no LVM pool) |", "| `VOLUME_GROUP` | `strata` |"), programs).size());
        assertEquals(1, DocFacts.flagDefaults(replaced(flags, "| `--pool-dir` | `POOL_DIR` |", "| `--pool-dir` | `POOL_DIRECTORY` |"), programs).size());
    }

    @Test
    void everyMetricTheServersExportIsInAMetricsTable() throws Exception {
        Map<String, List<String>> tables = new LinkedHashMap<>();
        for (String page : List.of("docs/operations.md", "docs/attributes.md")) {
            tables.put(page, Files.readAllLines(REPO.resolve(page)));
        }
        Set<String> exported = ExportedMetrics.fromSources(Manifests.defaultDir());
        assertTrue(exported.contains("strata_volume_io_unlimited_pods"), exported.toString());
        assertEquals(List.of(), DocFacts.undocumentedMetrics(exported, tables));
        Set<String> more = new TreeSet<>(exported);
        more.add("strata_pool_snapshots");
        assertEquals(1, DocFacts.undocumentedMetrics(more, tables).size());
    }

    /** The refusal parameters.md shows is the one the local backend gives, with every key an administrator may set. */
    @Test
    void parametersShowTheRefusalTheLocalBackendGives() throws Exception {
        String refusal = LocalParameters.STORAGE_CLASS.problem(Map.of("allocaton", "full")).orElseThrow();
        String page = String.join(" ", Files.readAllLines(PARAMETERS)).replaceAll("\\s+", " ");
        assertTrue(page.contains(refusal), "docs/parameters.md does not show: " + refusal);
        assertFalse(page.contains(refusal.replace("allocation, encryption, ", "allocation, ")), "the check would pass a list short of a key");
    }

    /**
     * Every "N crash points" the pages cite is a figure of the code, and CHANGELOG.md gives each:
     * the node's points CrashRecoveryTest arms, those of copies between nodes (TransferCrashTest), of
     * snapshot copies (SnapshotCopyCrashTest),
     * of group snapshots (GroupSnapshotCrashTest), of encryption (EncryptionTest) and of the LVM pool (LvmCrashRecoveryTest), and
     * controller-server's NFS points (NfsCrashRecoveryTest) and those of snapshot copies (SnapshotCopyControllerCrashTest).
     */
    @Test
    void crashPointFiguresAreTheCodes() throws IOException {
        Map<String, Long> figures = Map.of(
                "node-server's crash points outside copies between nodes, encryption and group snapshots (CrashPoints.oneNode, CrashRecoveryTest)",
                Stream.of(CrashPoint.values()).filter(CrashPoints::oneNode).count(),
                "node-server's crash points of group snapshots (CrashPoints.group, GroupSnapshotCrashTest)",
                Stream.of(CrashPoint.values()).filter(CrashPoints::group).count(),
                "node-server's crash points of copies between nodes (CrashPoints.transfer, TransferCrashTest)",
                Stream.of(CrashPoint.values()).filter(CrashPoints::transfer).count(),
                "node-server's crash points of snapshot copies (CrashPoints.snapshotCopy, SnapshotCopyCrashTest)",
                Stream.of(CrashPoint.values()).filter(CrashPoints::snapshotCopy).count(),
                "node-server's crash points of encryption (CrashPoints.encryption, EncryptionTest and EncryptedLvmTest)",
                Stream.of(CrashPoint.values()).filter(CrashPoints::encryption).count(),
                "node-server's crash points of the LVM pool (CrashPoints.lvmPool, LvmCrashRecoveryTest)",
                Stream.of(CrashPoint.values()).filter(CrashPoints::lvmPool).count(),
                "controller-server's NFS crash points (NfsCrashPoint)", (long) NfsCrashPoint.values().length,
                "controller-server's crash points of snapshot copies (LocalCrashPoint, SnapshotCopyControllerCrashTest)",
                (long) LocalCrashPoint.values().length);
        Pattern cited = Pattern.compile("(\\d+) crash points");
        List<String> wrong = new ArrayList<>();
        for (Path page : pages()) {
            Matcher figure = cited.matcher(String.join(" ", prose(page)).replaceAll("\\s+", " "));
            while (figure.find()) {
                if (!figures.containsValue(Long.parseLong(figure.group(1)))) {
                    wrong.add(REPO.relativize(page) + ": " + figure.group());
                }
            }
        }
        assertEquals(List.of(), wrong, "crash point figures that are none of " + figures);
        String changelog = String.join(" ", prose(REPO.resolve("CHANGELOG.md"))).replaceAll("\\s+", " ");
        figures.forEach((what, count) -> assertTrue(changelog.contains(count + " crash points"),
                "CHANGELOG.md gives no figure for " + what + ": " + count + " crash points"));
    }

    /**
     * docs/development.md's figures of the test classes, counted in every module's test sources: how
     * many there are, how many carry the tag root, and how many unit test classes the rest leaves
     * (ImageModulesTest, tagged packaged, is neither).
     */
    @Test
    void developmentCountsTheTestClassesAsTheSourcesHaveThem() throws IOException {
        Pattern test = Pattern.compile("@(Test|TestFactory|ParameterizedTest|RepeatedTest)\\b");
        Pattern classTag = Pattern.compile("(?m)^@Tag\\(\"(\\w+)\"\\)");
        int all = 0;
        int root = 0;
        int unit = 0;
        try (Stream<Path> modules = Files.list(REPO)) {
            for (Path sources : modules.map(module -> module.resolve("src/test/java")).filter(Files::isDirectory).toList()) {
                try (Stream<Path> files = Files.walk(sources)) {
                    for (Path file : files.filter(path -> path.toString().endsWith(".java")).toList()) {
                        String source = Files.readString(file);
                        if (test.matcher(source).find()) {
                            Matcher tag = classTag.matcher(source);
                            boolean tagged = tag.find();
                            all++;
                            root += tagged && tag.group(1).equals("root") ? 1 : 0;
                            unit += tagged ? 0 : 1;
                        }
                    }
                }
            }
        }
        String page = String.join(" ", prose(REPO.resolve("docs/development.md"))).replaceAll("\\s+", " ");
        assertTrue(page.contains("`@Tag(\"root\")` (JUnit 5): " + root + " of the " + all),
                "docs/development.md: " + root + " of the " + all + " test classes are tagged root");
        assertTrue(page.contains("the other half (" + unit + " classes)"), "docs/development.md: " + unit + " unit test classes");
    }

    /** The flags of each program's table rows: "both" counts for both servers. */
    private static Map<String, Set<String>> documentedFlags() throws IOException {
        Map<String, Set<String>> flags = new LinkedHashMap<>();
        for (String row : section("## Server flags")) {
            Matcher flag = TABLE_CODE_CELL.matcher(row);
            if (!flag.find() || !flag.group(1).startsWith("--")) {
                continue;
            }
            String[] cells = row.split("\\|");
            String program = cells[4].strip();
            List<String> programs = switch (program) {
                case "both" -> List.of("controller-server", "node-server");
                case "controller" -> List.of("controller-server");
                case "node" -> List.of("node-server");
                default -> throw new AssertionError("program '" + program + "' of " + row);
            };
            for (String name : programs) {
                assertTrue(flags.computeIfAbsent(name, key -> new TreeSet<>()).add(flag.group(1).substring(2)), "listed twice: " + row);
            }
        }
        assertFalse(flags.isEmpty(), "no flag table in docs/parameters.md");
        return flags;
    }

    /** The lines of docs/parameters.md below {@code heading}, up to the next heading of its level. */
    private static List<String> section(String heading) throws IOException {
        List<String> lines = Files.readAllLines(PARAMETERS);
        int start = lines.indexOf(heading);
        assertTrue(start >= 0, "docs/parameters.md has no '" + heading + "'");
        List<String> section = new ArrayList<>();
        for (String line : lines.subList(start + 1, lines.size())) {
            if (line.startsWith("## ")) {
                break;
            }
            section.add(line);
        }
        return section;
    }

    private static Set<String> firstColumnCodes(List<String> lines) {
        Set<String> codes = new LinkedHashSet<>();
        for (String line : lines) {
            Matcher code = TABLE_CODE_CELL.matcher(line);
            if (code.find()) {
                codes.add(code.group(1));
            }
        }
        return codes;
    }

    /** The lines of every page outside code blocks, by its path in the repository (CHANGELOG.md, a history, left out). */
    private static Map<String, List<String>> pageLines() throws IOException {
        Map<String, List<String>> pages = new LinkedHashMap<>();
        for (Path page : pages()) {
            if (!page.endsWith("CHANGELOG.md")) {
                pages.put(REPO.relativize(page).toString(), prose(page));
            }
        }
        return pages;
    }

    private static Container container(Manifests manifests, String kind, String name, String container) {
        return manifests.pod(kind, name).containers().stream().filter(c -> c.name().equals(container)).findFirst().orElseThrow();
    }

    /** {@code lines} with the one line that contains {@code old} changed to hold {@code replacement} instead. */
    private static List<String> replaced(List<String> lines, String old, String replacement) {
        List<String> copy = new ArrayList<>(lines);
        int index = -1;
        for (int i = 0; i < copy.size(); i++) {
            if (copy.get(i).contains(old)) {
                assertEquals(-1, index, "more than one line holds " + old);
                index = i;
            }
        }
        assertTrue(index >= 0, "no line holds " + old);
        copy.set(index, copy.get(index).replace(old, replacement));
        return copy;
    }

    private static List<Path> pages() throws IOException {
        List<Path> pages = new ArrayList<>(List.of(REPO.resolve("README.md"), REPO.resolve("CHANGELOG.md"), REPO.resolve("deploy/README.md")));
        try (Stream<Path> docs = Files.list(REPO.resolve("docs"))) {
            docs.filter(path -> path.toString().endsWith(".md")).sorted().forEach(pages::add);
        }
        return pages;
    }

    /** The lines of a page outside its fenced code blocks. */
    private static List<String> prose(Path page) throws IOException {
        List<String> prose = new ArrayList<>();
        boolean inBlock = false;
        for (String line : Files.readAllLines(page)) {
            if (line.strip().startsWith("```")) {
                inBlock = !inBlock;
            } else if (!inBlock) {
                prose.add(line);
            }
        }
        return prose;
    }

    /** The relative link targets of a page, outside code blocks and code spans. */
    private static List<String> links(Path page) throws IOException {
        List<String> targets = new ArrayList<>();
        for (String line : prose(page)) {
            Matcher link = LINK.matcher(line.replaceAll("`[^`]*`", ""));
            while (link.find()) {
                String target = link.group(1);
                if (!target.matches("^[a-z]+:.*")) { // https:, mailto:
                    targets.add(target);
                }
            }
        }
        return targets;
    }

    /** Why {@code target}, linked from {@code page}, leads nowhere; empty when it resolves. */
    private static Optional<String> brokenLink(Path page, String target) throws IOException {
        int hash = target.indexOf('#');
        String path = hash < 0 ? target : target.substring(0, hash);
        Path file = path.isEmpty() ? page : page.getParent().resolve(path).normalize();
        String where = REPO.relativize(page.toAbsolutePath()) + ": " + target;
        if (!Files.exists(file)) {
            return Optional.of(where + " (no such file)");
        }
        if (hash >= 0 && !(file.toString().endsWith(".md") && anchors(file).contains(target.substring(hash + 1)))) {
            return Optional.of(where + " (no such heading)");
        }
        return Optional.empty();
    }

    /** The anchors GitHub makes of a page's headings: lower case, punctuation dropped, spaces as hyphens. */
    private static Set<String> anchors(Path page) throws IOException {
        Set<String> anchors = new LinkedHashSet<>();
        for (String line : prose(page)) {
            if (line.startsWith("#")) {
                String text = line.replaceFirst("^#+\\s*", "").toLowerCase(Locale.ROOT);
                anchors.add(text.replaceAll("[^\\p{L}\\p{N} _-]", "").replace(' ', '-'));
            }
        }
        return anchors;
    }
}
