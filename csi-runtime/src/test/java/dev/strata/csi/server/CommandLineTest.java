package dev.strata.csi.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.testing.ServerProcess;
import dev.strata.csi.testing.SlowProbeDriver;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** What a person sees when the command line is wrong: one line, exit code 2, no stack trace. */
@Tag("root")
class CommandLineTest {

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "--bogus=1                          | unknown flag --bogus",
        "--endpoint tcp://127.0.0.1:10000   | is not a unix socket",
        "--endpoint unix://relative/csi.sock| needs an absolute socket path",
        "--driver-name -bad-name-           | driver name '-bad-name-' is not valid",
        "--driver-name under_score.csi.dev  | driver name 'under_score.csi.dev' is not valid",
        "--shutdown-grace soon              | takes a duration",
        "--v loud                           | takes a whole number",
        "--endpoint                         | needs a value",
        "stray                              | unexpected argument 'stray'",
    })
    void badFlagExitsTwoWithOneClearLine(String args, String expected) throws Exception {
        try (ServerProcess server = ServerProcess.start(SlowProbeDriver.class, args.trim().split(" +"))) {
            assertEquals(2, server.exitCode(), server.output());
            String output = server.output().strip();
            assertEquals(1, output.lines().count(), output);
            assertTrue(output.startsWith("slow-probe-driver: "), output);
            assertTrue(output.contains(expected), output);
            assertTrue(output.endsWith("(see --help)"), output);
        }
    }

    @Test
    void environmentSuppliesAFlagThatIsNotGiven() throws Exception {
        try (ServerProcess server = ServerProcess.start(SlowProbeDriver.class,
                Map.of("CSI_ENDPOINT", "tcp://10.0.0.1:1"))) {
            assertEquals(2, server.exitCode());
            assertTrue(server.output().contains("endpoint 'tcp://10.0.0.1:1' is not a unix socket"), server.output());
        }
    }

    @Test
    void helpDocumentsEveryFlagAndExitsZero() throws Exception {
        try (ServerProcess server = ServerProcess.start(SlowProbeDriver.class, "--help")) {
            assertEquals(0, server.exitCode());
            String help = server.output();
            for (String flag : new String[] {"--endpoint", "--driver-name", "--v", "--shutdown-grace", "--probe-delay"}) {
                assertTrue(help.contains("  " + flag + "\n"), flag + " missing from:\n" + help);
            }
            assertTrue(help.contains("env CSI_ENDPOINT"), help);
            assertFalse(help.contains("Exception"), help);
        }
    }
}
