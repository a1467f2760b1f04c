package dev.strata.csi.node.local.crypt;

import dev.strata.csi.node.local.DeviceException;

/** No key slot of a LUKS header opens with the passphrase given. */
public final class WrongPassphraseException extends DeviceException {

    public WrongPassphraseException(String message) {
        super(message);
    }
}
