package dev.strata.csi.node.local.fs;

import dev.strata.csi.node.local.DeviceException;

/** A filesystem type the driver does not create: a bad request, not a failure of the node. */
public final class UnsupportedFilesystemException extends DeviceException {

    public UnsupportedFilesystemException(String message) {
        super(message);
    }
}
