package dev.strata.csi.system;

/** An external program could not be started, did not finish in time, or failed; the message is one line. */
public final class CommandException extends Exception {

    public CommandException(String message) {
        super(message);
    }

    public CommandException(String message, Throwable cause) {
        super(message, cause);
    }
}
