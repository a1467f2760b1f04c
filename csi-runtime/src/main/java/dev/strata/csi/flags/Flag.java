package dev.strata.csi.flags;

import java.util.Locale;

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

    /** A flag that takes a value, with an environment variable named otherwise than {@link #of} names it. */
    public Flag(String name, String env, String defaultValue, String help) {
        this(name, env, defaultValue, help, false);
    }

    /**
     * A flag that takes a value, with the environment variable of its name: in capitals, dashes as
     * underscores ({@code pool-dir}: POOL_DIR).
     */
    public static Flag of(String name, String defaultValue, String help) {
        return new Flag(name, environmentName(name), defaultValue, help, false);
    }

    /** A boolean flag, as Go's flag.Bool: {@code --name} alone means true; its environment variable as {@link #of} names it. */
    public static Flag bool(String name, boolean defaultValue, String help) {
        return new Flag(name, environmentName(name), Boolean.toString(defaultValue), help, true);
    }

    private static String environmentName(String name) {
        return name.toUpperCase(Locale.ROOT).replace('-', '_');
    }

    public boolean required() {
        return defaultValue == null;
    }
}
