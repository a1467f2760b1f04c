package dev.strata.csi.deploy;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The image's Java runtime carries every module the servers need (issue 25: it lacked
 * java.net.http, and controller-server answered the first Register with NoClassDefFoundError).
 * It reads the servers' jars, which mvn test does not make: tagged packaged, so only runs that
 * package them (hack/test.sh) run it.
 */
@Tag("packaged")
class ImageModulesTest {

    static final Path LIST = Manifests.defaultDir().toAbsolutePath().getParent().resolve("hack/java-modules");
    static Set<String> needed;

    @BeforeAll
    static void readTheJars() throws Exception {
        needed = ImageModules.needed(ImageModules.imageJars(Manifests.defaultDir().toAbsolutePath().getParent()));
    }

    @Test
    void theImagesRuntimeHoldsEveryModuleTheServersUse() throws Exception {
        assertTrue(needed.contains("java.net.http"), "jdeps sees the HTTP client the signing keys are read with: " + needed);
        assertEquals(List.of(), ImageModules.missing(ImageModules.listed(LIST), needed),
                "modules the servers' jars use that the image's runtime lacks: add them to " + LIST);
    }

    @Test
    void aModuleTakenOffTheListIsNamed() throws Exception {
        Set<String> listed = new TreeSet<>(ImageModules.listed(LIST));
        listed.remove("java.net.http");
        assertEquals(List.of("java.net.http"), ImageModules.missing(listed, needed));
        listed.remove("java.sql");
        listed.remove("java.logging");
        assertEquals(List.of("java.net.http", "java.sql"), ImageModules.missing(listed, needed).stream().sorted().toList());
        assertEquals(List.of(), ImageModules.missing(Set.of("java.se", "jdk.httpserver", "jdk.jfr", "jdk.unsupported"), needed),
                "a module the listed ones require is linked with them");
    }
}
