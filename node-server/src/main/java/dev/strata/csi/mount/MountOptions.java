package dev.strata.csi.mount;

import java.util.List;

/**
 * Mount options as they reach {@code mount -o}. They come from requests (a StorageClass's
 * mountOptions, a volume capability's mount flags), so each one is checked before it goes near a
 * command line: it must stay one option and can never become an argument of its own.
 */
public final class MountOptions {

    private MountOptions() {}

    /** The options as the single value of {@code -o}, or an exception naming the first bad one. */
    public static String join(List<String> options) throws MountException {
        for (String option : options) {
            check(option);
        }
        return String.join(",", options);
    }

    private static void check(String option) throws MountException {
        String problem = option.isEmpty() ? "is empty"
                : option.indexOf(',') >= 0 ? "contains a comma, so it would be several options"
                : option.startsWith("-") ? "starts with '-'"
                : option.chars().anyMatch(Character::isISOControl) ? "contains a control character"
                : null;
        if (problem != null) {
            throw new MountException("mount option \"" + printable(option) + "\" " + problem);
        }
    }

    /** Keeps an error message on one line whatever a request put in a value. */
    static String printable(String value) {
        StringBuilder out = new StringBuilder();
        value.codePoints().forEach(c -> {
            if (Character.isISOControl(c)) {
                out.append(String.format("\\x%02x", c));
            } else {
                out.appendCodePoint(c);
            }
        });
        return out.toString();
    }
}
