package dev.strata.csi.node.local.crypt;

import dev.strata.csi.backend.local.LocalParameters;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;

/**
 * An encrypted volume's passphrase, from the secrets of NodeStageVolume or NodeExpandVolume. It
 * goes to cryptsetup on its standard input only; {@link #toString} never shows it, so a log line
 * or a message that names one by mistake shows nothing.
 */
public final class Passphrase {

    private final byte[] bytes;

    private Passphrase(byte[] bytes) {
        this.bytes = bytes;
    }

    /** The passphrase under {@link LocalParameters#PASSPHRASE_SECRET_KEY} in {@code secrets}; empty when absent or empty. */
    public static Optional<Passphrase> from(Map<String, String> secrets) {
        String value = secrets.get(LocalParameters.PASSPHRASE_SECRET_KEY);
        return value == null || value.isEmpty() ? Optional.empty() : Optional.of(new Passphrase(value.getBytes(StandardCharsets.UTF_8)));
    }

    /** A copy of the bytes, for a program's standard input. */
    public byte[] bytes() {
        return bytes.clone();
    }

    @Override
    public String toString() {
        return "[redacted]";
    }
}
