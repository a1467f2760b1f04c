package dev.strata.csi.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.deploy.Kubelet;
import dev.strata.csi.testing.SystemState;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The container run follows the manifests, whatever they say: a flag node.yaml gives node-server
 * that the program does not take stops the run, which names the container, its exit code and the
 * flag. Run by the conformance-in-containers execution only (it needs Docker and the image).
 */
@Tag("root")
class AsDeployedTest {

    @TempDir
    Path dir;

    @Test
    void aFlagTheManifestsGiveThatTheProgramRefusesFailsTheRun() throws Exception {
        DriverContainers.requirePossible();
        Path deploy = copy(Kubelet.deployDir().toAbsolutePath(), dir.resolve("deploy"));
        Path node = deploy.resolve("node.yaml");
        String manifest = Files.readString(node);
        String flag = "            - --pool-dir=/var/lib/strata/pool\n";
        assertTrue(manifest.contains(flag), "node.yaml gives --pool-dir as this test expects");
        Files.writeString(node, manifest.replace(flag, flag + "            - --no-such-flag=1\n"));

        AssertionError error = assertThrows(AssertionError.class, () -> {
            try (DriverContainers started = DriverContainers.start(dir.resolve("run"), deploy)) {
                // not reached: close() stops what started
            }
        });
        assertTrue(error.getMessage().startsWith("node-server exited with code 2 before it was ready"), error.getMessage());
        assertTrue(error.getMessage().contains("no-such-flag"), "the output names the flag: " + error.getMessage());
        assertEquals(List.of(), SystemState.cleanUp(dir), "mounts left behind");
    }

    /** deploy/'s manifests, without its build and tests. */
    private static Path copy(Path from, Path to) throws IOException {
        try (Stream<Path> files = Files.walk(from)) {
            for (Path file : files.filter(path -> !path.startsWith(from.resolve("src")) && !path.startsWith(from.resolve("target")))
                    .toList()) {
                Path target = to.resolve(from.relativize(file).toString());
                if (Files.isDirectory(file)) {
                    Files.createDirectories(target);
                } else {
                    Files.copy(file, target);
                }
            }
        }
        return to;
    }
}
