package dev.strata.csi.server;

/** The server cannot start (socket in use, not a socket, no permission): exit code 1. */
public final class StartupException extends Exception {

    public StartupException(String message) {
        super(message);
    }

    public StartupException(String message, Throwable cause) {
        super(message, cause);
    }
}
