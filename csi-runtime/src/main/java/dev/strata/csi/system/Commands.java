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

    /**
     * As {@link #run(Duration, String...)}, with {@code input} written to the program's standard
     * input and then closed: how a secret reaches a program, never on its command line, which
     * every process of the node can read. A stand-in that takes no input refuses.
     */
    default CommandResult run(Duration timeout, byte[] input, String... argv) throws CommandException {
        throw new CommandException("cannot pass input to " + argv[0] + " with this runner");
    }
}
