package dev.strata.csi.node.local.crypt;

import dev.strata.csi.backend.local.LocalParameters;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Optional;

/**
 * An encrypted volume's passphrase, from the secrets of NodeStageVolume, NodeExpandVolume or
 * NodePublishVolume. It goes to cryptsetup on its standard input only; {@link #toString} never
 * shows it, so a log line or a message that names one by mistake shows nothing.
 */
public final class Passphrase {

    private final byte[] bytes;

    private Passphrase(byte[] bytes) {
        this.bytes = bytes;
    }

    /** The passphrase under {@link LocalParameters#PASSPHRASE_SECRET_KEY} in {@code secrets}; empty when absent or empty. */
    public static Optional<Passphrase> from(Map<String, String> secrets) {
        return under(secrets, LocalParameters.PASSPHRASE_SECRET_KEY);
    }

    /**
     * The passphrase being rotated away from, under {@link LocalParameters#PREVIOUS_PASSPHRASE_SECRET_KEY}; empty when
     * absent, empty or the same as the current one (nothing to rotate).
     */
    public static Optional<Passphrase> previousFrom(Map<String, String> secrets) {
        return under(secrets, LocalParameters.PREVIOUS_PASSPHRASE_SECRET_KEY)
                .filter(previous -> !Optional.ofNullable(secrets.get(LocalParameters.PASSPHRASE_SECRET_KEY))
                        .equals(Optional.of(new String(previous.bytes, StandardCharsets.UTF_8))));
    }

    private static Optional<Passphrase> under(Map<String, String> secrets, String key) {
        String value = secrets.get(key);
        return value == null || value.isEmpty() ? Optional.empty() : Optional.of(new Passphrase(value.getBytes(StandardCharsets.UTF_8)));
    }

    /** Its length in bytes: where two passphrases share a program's standard input, each is read by its length. */
    public int length() {
        return bytes.length;
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
