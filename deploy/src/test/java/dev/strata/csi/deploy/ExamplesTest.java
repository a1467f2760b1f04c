package dev.strata.csi.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every file under deploy/ is safe to apply as written: it holds no secret value (a Secret with
 * data or stringData, a kustomize secretGenerator with literals), and no object its own comments
 * tell the user to create first ({@code kubectl create secret generic <name>} above a Secret of
 * that name would replace the user's key with the file's when the file is applied).
 */
class ExamplesTest {

    /** A kubectl create command in a file's comments: the kind (as kubectl's subcommand) and the name. */
    private static final Pattern CREATE = Pattern.compile(
            "kubectl(?:\\s+(?:-n\\s+|--namespace[= ])\\S+)*\\s+create\\s+([a-z]+)(?:\\s+(?:generic|tls|docker-registry))?\\s+([a-z0-9][a-z0-9.-]*)");

    @Test
    void noFileUnderDeployHoldsASecretValueOrAnObjectItsCommentsSayToCreateFirst() throws IOException {
        List<Path> files = files(Manifests.defaultDir());
        assertTrue(files.stream().anyMatch(file -> file.endsWith("examples/encryption.yaml")), files.toString());
        assertTrue(files.stream().anyMatch(file -> file.endsWith("components/nfs-exports/controller-mounts-exports.yaml")), files.toString());
        List<String> problems = new ArrayList<>();
        for (Path file : files) {
            problems.addAll(problems(file));
        }
        assertEquals(List.of(), problems);
    }

    /** The encryption example as it was: its comments create the Secret, and it holds one with a passphrase. */
    @Test
    void theOldEncryptionExampleFailsOnBothCounts(@TempDir Path dir) throws IOException {
        String example = Files.readString(Manifests.defaultDir().resolve("examples/encryption.yaml"));
        assertEquals(List.of(), problems(Files.writeString(dir.resolve("encryption.yaml"), example)));
        String old = example.replace("apiVersion: storage.k8s.io/v1\nkind: StorageClass", """
                apiVersion: v1
                kind: Secret
                metadata:
                  name: strata-luks-key
                  namespace: strata-system
                type: Opaque
                stringData:
                  passphrase: replace-me-with-a-random-passphrase
                ---
                apiVersion: storage.k8s.io/v1
                kind: StorageClass""");
        List<String> problems = problems(Files.writeString(dir.resolve("old-encryption.yaml"), old));
        assertEquals(2, problems.size(), problems.toString());
        assertTrue(problems.getFirst().contains("Secret strata-luks-key holds a value"), problems.toString());
        assertTrue(problems.getLast().contains("tell the user to create Secret strata-luks-key first"), problems.toString());
    }

    @Test
    void aSecretWithDataOrAGeneratorWithLiteralsIsFound(@TempDir Path dir) throws IOException {
        Path secret = Files.writeString(dir.resolve("secret.yaml"), """
                apiVersion: v1
                kind: Secret
                metadata:
                  name: token
                data:
                  token: c2VjcmV0
                """);
        assertEquals(1, problems(secret).size());
        Path reference = Files.writeString(dir.resolve("reference.yaml"), """
                # kubectl create configmap settings --from-file=settings.conf
                apiVersion: v1
                kind: ConfigMap
                metadata:
                  name: settings
                """);
        assertEquals(1, problems(reference).size());
        Path generator = Files.writeString(dir.resolve("kustomization.yaml"), """
                secretGenerator:
                  - name: credentials
                    files: [credentials/token]
                  - name: passwords
                    literals: [password=hunter2]
                """);
        assertEquals(List.of(generator + ": secretGenerator passwords holds literal values"), problems(generator));
    }

    /** The YAML files a user applies: all of deploy/ but the build's and the tests' own. */
    static List<Path> files(Path deploy) throws IOException {
        try (Stream<Path> walk = Files.walk(deploy)) {
            return walk.filter(file -> file.toString().endsWith(".yaml") || file.toString().endsWith(".yml"))
                    .filter(file -> !deploy.relativize(file).startsWith("src") && !deploy.relativize(file).startsWith("target"))
                    .sorted().toList();
        }
    }

    static List<String> problems(Path file) throws IOException {
        List<String> problems = new ArrayList<>();
        List<Map<String, Object>> documents = Manifests.parse(file);
        for (Map<String, Object> document : documents) {
            if ("Secret".equals(document.get("kind")) && (has(document, "data") || has(document, "stringData"))) {
                problems.add(file + ": Secret " + Tree.string(document, "metadata", "name") + " holds a value; reference a Secret the user creates");
            }
            for (Map<String, Object> generator : Tree.maps(document, "secretGenerator")) {
                if (has(generator, "literals")) {
                    problems.add(file + ": secretGenerator " + generator.get("name") + " holds literal values");
                }
            }
        }
        StringBuilder comments = new StringBuilder();
        for (String line : Files.readAllLines(file)) {
            if (line.strip().startsWith("#")) {
                comments.append(line.strip().substring(1).replace("\\", " ")).append(' ');
            }
        }
        Matcher create = CREATE.matcher(comments);
        while (create.find()) {
            for (Map<String, Object> document : documents) {
                String kind = String.valueOf(document.get("kind"));
                if (kind.toLowerCase(Locale.ROOT).equals(create.group(1)) && create.group(2).equals(Tree.string(document, "metadata", "name"))) {
                    problems.add(file + ": its comments tell the user to create " + kind + " " + create.group(2)
                            + " first, and applying the file would replace it");
                }
            }
        }
        return problems;
    }

    private static boolean has(Map<String, Object> map, String key) {
        return map.get(key) instanceof Map<?, ?> values ? !values.isEmpty() : map.get(key) instanceof List<?> list && !list.isEmpty();
    }
}
