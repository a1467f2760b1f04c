package dev.strata.csi.flags;

/** A bad or missing flag: reported as one line on stderr with exit code 2. */
public final class UsageException extends Exception {

    public UsageException(String message) {
        super(message);
    }
}
