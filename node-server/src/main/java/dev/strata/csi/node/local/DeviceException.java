package dev.strata.csi.node.local;

/** A loop device or filesystem operation failed; the message is one line fit for a gRPC status. */
public class DeviceException extends Exception {

    public DeviceException(String message) {
        super(message);
    }

    public DeviceException(String message, Throwable cause) {
        super(message, cause);
    }
}
