package dev.strata.csi.flags;

/**
 * One command-line flag, in the style of the CSI sidecars: {@code --name=value} or
 * {@code --name value}, with an environment variable as fallback so that a Kubernetes manifest can
 * fill it from the downward API.
 *
 * @param name         flag name without dashes
 * @param env          environment variable read when the flag is not given, or null
 * @param defaultValue value when neither is given; null makes the flag required
 * @param help         one line for --help
 */
public record Flag(String name, String env, String defaultValue, String help) {

    public boolean required() {
        return defaultValue == null;
    }
}
