package dev.strata.csi.identity;

import dev.strata.csi.flags.UsageException;
import java.util.regex.Pattern;

/**
 * The driver's name and version as GetPluginInfo reports them. The name is what Kubernetes
 * objects refer to (CSIDriver, StorageClass provisioner, PV driver), so it must follow the
 * spec's domain-name form.
 */
public record PluginInfo(String name, String version) {

    public static final String DEFAULT_NAME = "strata.csi.dev";

    // CSI spec: domain name notation, at most 63 characters, alphanumerics at both ends and
    // dashes, dots and alphanumerics between.
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9]([A-Za-z0-9.-]{0,61}[A-Za-z0-9])?");

    public static PluginInfo of(String name, String version) throws UsageException {
        if (!NAME.matcher(name).matches()) {
            throw new UsageException("driver name '" + name
                    + "' is not valid: up to 63 letters, digits, '-' and '.', beginning and ending with a letter or digit");
        }
        return new PluginInfo(name, version);
    }
}
