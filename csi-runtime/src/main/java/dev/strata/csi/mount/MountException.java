package dev.strata.csi.mount;

/** A mount, unmount or mount-table read failed; the message is one line fit for a gRPC status. */
public final class MountException extends Exception {

    public MountException(String message) {
        super(message);
    }

    public MountException(String message, Throwable cause) {
        super(message, cause);
    }
}
