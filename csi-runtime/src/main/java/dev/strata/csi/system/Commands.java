package dev.strata.csi.system;

import java.time.Duration;

/** Runs external programs. The seam between the driver's logic and the tools it drives, so tests can stand in for them. */
@FunctionalInterface
public interface Commands {

    /**
     * Runs {@code argv[0]} with the remaining arguments, each passed as it is (no shell), and
     * waits for it to exit. A non-zero exit is a result, not an error; see {@link CommandResult#check}.
     *
     * @throws CommandException if the program cannot be started or does not finish within {@code timeout}
     */
    CommandResult run(Duration timeout, String... argv) throws CommandException;
}
