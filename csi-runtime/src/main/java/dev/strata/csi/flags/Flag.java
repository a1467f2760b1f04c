package dev.strata.csi.flags;

/**
 * One command-line flag, parsed as Go's flag package parses the CSI sidecars' flags:
 * {@code --name=value} or {@code --name value}, one dash or two; a boolean flag alone means true
 * and takes a value as {@code --name=false}. The environment variable is a fallback so
 * that a Kubernetes manifest can fill the flag from the downward API.
 *
 * @param name         flag name without dashes
 * @param env          environment variable read when the flag is not given, or null
 * @param defaultValue value when neither is given; null makes the flag required
 * @param help         one line for --help
 * @param isBool       a boolean flag: alone it means true; it takes the next argument only if that
 *                     is true or false
 */
public record Flag(String name, String env, String defaultValue, String help, boolean isBool) {

    /** A flag that takes a value. */
    public Flag(String name, String env, String defaultValue, String help) {
        this(name, env, defaultValue, help, false);
    }

    /** A boolean flag, as Go's flag.Bool: {@code --name} alone means true. */
    public static Flag bool(String name, String env, boolean defaultValue, String help) {
        return new Flag(name, env, Boolean.toString(defaultValue), help, true);
    }

    public boolean required() {
        return defaultValue == null;
    }
}
