package dev.strata.csi.conformance;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.protobuf.ProtocolMessageEnum;
import csi.v1.Csi.GetPluginCapabilitiesRequest;
import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.GetPluginInfoResponse;
import csi.v1.Csi.PluginCapability;
import csi.v1.Csi.ProbeRequest;
import csi.v1.Csi.ProbeResponse;
import dev.strata.csi.conformance.ConformanceTarget.Endpoint;
import dev.strata.csi.e2e.SystemState;
import java.nio.file.Path;
import java.util.List;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.condition.DisabledIf;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The CSI requirements csi-sanity checks (required fields, error codes, idempotency,
 * capabilities), as our own tests against one controller endpoint and one node endpoint: a local
 * cluster by default, or any driver's endpoints given with {@code -Dconformance.controller} and
 * {@code -Dconformance.node} (see {@link ConformanceTarget}).
 *
 * <p>Checks of an RPC behind a capability run only when the driver advertises it, and are
 * reported as skipped otherwise; {@link #localDriverAdvertisesEverythingTheSuiteChecks} makes sure
 * nothing skips against our own driver. Every test undoes what it made ({@link Cleanup}), and
 * after each one nothing may be left mounted or attached below the suite's directories.
 */
class ConformanceTest {

    static final String ACCESS_TYPES = "dev.strata.csi.conformance.ConformanceTarget#accessTypes";

    /** How often a repeated call is sent: each repetition after the first must change nothing. */
    static final int REPEATS = 10;

    @TempDir
    static Path dir;

    static ConformanceTarget target;

    Cleanup cleanup;

    @BeforeAll
    static void openTarget() throws Exception {
        target = ConformanceTarget.open(dir);
    }

    @AfterAll
    static void closeTarget() throws Exception {
        if (target != null) {
            target.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir), "mounts or loop devices left after the suite");
    }

    @BeforeEach
    void newCleanup() {
        cleanup = new Cleanup(target);
    }

    @AfterEach
    void undoAndCheckNothingIsLeft() {
        assertAll(
                cleanup::run,
                () -> assertEquals(List.of(), target.leftovers(), "the test left mounts or loop devices behind"));
    }

    @Test
    @DisabledIf(value = "dev.strata.csi.conformance.ConformanceTarget#external",
            disabledReason = "another driver may offer less; the suite then skips what it lacks")
    void localDriverAdvertisesEverythingTheSuiteChecks() {
        List<ProtocolMessageEnum> missing = ConformanceTarget.GATES.stream().filter(gate -> !target.advertises(gate)).toList();
        assertEquals(List.of(), missing, "our driver must advertise every capability the suite gates on, or checks skip in CI");
    }

    static <E extends Enum<E> & ProtocolMessageEnum> void assertKnown(E value, String what) {
        assertFalse(value.name().equals("UNKNOWN") || value.name().equals("UNRECOGNIZED"),
                what + " " + value + " is not a value the CSI spec defines");
    }

    @Nested
    class Identity {

        /** The spec's rule: at most 63 characters, alphanumeric at both ends, dashes, dots and alphanumerics between. */
        static final Pattern PLUGIN_NAME = Pattern.compile("[A-Za-z0-9]([A-Za-z0-9.-]{0,61}[A-Za-z0-9])?");

        @ParameterizedTest
        @EnumSource(Endpoint.class)
        void getPluginInfoReturnsAConformingNameAndAVendorVersion(Endpoint endpoint) {
            GetPluginInfoResponse info = target.identity(endpoint).getPluginInfo(GetPluginInfoRequest.getDefaultInstance());
            assertTrue(info.getName().length() <= 63, "name longer than 63 characters: " + info.getName());
            assertTrue(PLUGIN_NAME.matcher(info.getName()).matches(), "name '" + info.getName()
                    + "' must begin and end with a letter or digit, with only letters, digits, '-' and '.' between");
            assertFalse(info.getVendorVersion().isEmpty(), "vendor_version is required");
        }

        @Test
        void controllerAndNodeNameTheSamePlugin() {
            // A CO matches the two halves of a driver by this name.
            assertEquals(target.identity(Endpoint.CONTROLLER).getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName(),
                    target.identity(Endpoint.NODE).getPluginInfo(GetPluginInfoRequest.getDefaultInstance()).getName());
        }

        @ParameterizedTest
        @EnumSource(Endpoint.class)
        void getPluginCapabilitiesReturnsOnlyKnownCapabilities(Endpoint endpoint) {
            for (PluginCapability capability : target.identity(endpoint)
                    .getPluginCapabilities(GetPluginCapabilitiesRequest.getDefaultInstance()).getCapabilitiesList()) {
                switch (capability.getTypeCase()) {
                    case SERVICE -> assertKnown(capability.getService().getType(), "plugin service capability");
                    case VOLUME_EXPANSION -> assertKnown(capability.getVolumeExpansion().getType(), "volume expansion capability");
                    case TYPE_NOT_SET -> fail("a plugin capability without a type: " + capability);
                }
            }
        }

        @ParameterizedTest
        @EnumSource(Endpoint.class)
        void probeSucceedsAndTheDriverBecomesReady(Endpoint endpoint) throws InterruptedException {
            // Not ready is a valid answer while a driver starts, but not for long.
            long deadline = System.nanoTime() + 10_000_000_000L;
            ProbeResponse probe;
            do {
                probe = target.identity(endpoint).probe(ProbeRequest.getDefaultInstance());
                if (!probe.hasReady() || probe.getReady().getValue()) {
                    return;
                }
                Thread.sleep(100);
            } while (System.nanoTime() < deadline);
            fail("Probe still answers ready=false after 10s");
        }
    }
}
