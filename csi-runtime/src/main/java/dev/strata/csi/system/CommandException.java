package dev.strata.csi.system;

/** An external program could not be started, did not finish in time, or failed; the message is one line. */
public final class CommandException extends Exception {

    private final boolean timedOut;

    public CommandException(String message) {
        this(message, null, false);
    }

    public CommandException(String message, Throwable cause) {
        this(message, cause, false);
    }

    private CommandException(String message, Throwable cause, boolean timedOut) {
        super(message, cause);
        this.timedOut = timedOut;
    }

    /** The program did not finish within its deadline and was killed. */
    public static CommandException timedOut(String message) {
        return new CommandException(message, null, true);
    }

    /** Whether the program was killed at its deadline, rather than failing by itself. */
    public boolean timedOut() {
        return timedOut;
    }
}
