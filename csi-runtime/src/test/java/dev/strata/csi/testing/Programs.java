package dev.strata.csi.testing;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

/** The programs tests run to set things up and to check effects with tools other than the driver's code. */
public final class Programs {

    private Programs() {}

    /** Exit status and output (stdout and stderr together) of a program. */
    public record Result(int status, String output) {}

    /** Runs {@code command} to its end, one minute at most. */
    public static Result execute(String... command) throws Exception {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!process.waitFor(60, TimeUnit.SECONDS)) {
            process.destroyForcibly();
            throw new IllegalStateException(String.join(" ", command) + " did not finish");
        }
        return new Result(process.exitValue(), out);
    }

    /** The output of a command that must succeed. */
    public static String run(String... command) throws Exception {
        Result result = execute(command);
        if (result.status() != 0) {
            throw new IllegalStateException(String.join(" ", command) + " exited with " + result.status() + ": " + result.output());
        }
        return result.output();
    }
}
