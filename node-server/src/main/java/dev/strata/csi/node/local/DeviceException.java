package dev.strata.csi.node.local;

import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;

/** A loop device or filesystem operation failed; the message is one line fit for a gRPC status. */
public class DeviceException extends Exception {

    public DeviceException(String message) {
        super(message);
    }

    public DeviceException(String message, Throwable cause) {
        super(message, cause);
    }

    /** Nothing when the program {@code what} names exited 0; else its exit status and message as a DeviceException. */
    public static void check(CommandResult result, String what) throws DeviceException {
        try {
            result.check(what);
        } catch (CommandException e) {
            throw new DeviceException(e.getMessage(), e);
        }
    }
}
