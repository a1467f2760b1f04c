package dev.strata.csi.backend.local;

import dev.strata.csi.rpc.CsiException;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The volume id the driver hands out: {@code local/<node-id>/<name>}. It names the node that
 * holds the data, so any controller replica can route a call to that node's agent without state
 * of its own, and the name, which is the image's file name in the node's pool.
 */
public record LocalVolumeId(String nodeId, String name) {

    private static final String LOCAL = "local";
    /** What every local volume id starts with. */
    public static final String PREFIX = LOCAL + "/";

    /** Kubernetes node names are DNS subdomains; anything with a '/' could not round-trip. */
    static final Pattern NODE_ID = Pattern.compile("[A-Za-z0-9]([A-Za-z0-9._-]{0,251}[A-Za-z0-9])?");

    /**
     * Volume names become file names in the pool, so only characters that cannot leave it are
     * allowed: no '/', no leading '.', at most 128 characters. Provisioner names (pvc-UID) fit.
     */
    static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,127}");

    public LocalVolumeId {
        if (!NODE_ID.matcher(nodeId).matches()) {
            throw new IllegalArgumentException("not a node id: " + nodeId);
        }
        if (!NAME.matcher(name).matches()) {
            throw new IllegalArgumentException("not a volume name: " + name);
        }
    }

    /** Whether volumes can live on a node of this id: a Kubernetes node name, which never holds a '/'. */
    public static boolean nodeIdAllowed(String nodeId) {
        return NODE_ID.matcher(nodeId).matches();
    }

    /** INVALID_ARGUMENT unless {@code name} may name a volume. */
    public static void checkName(String name) {
        if (!NAME.matcher(name).matches()) {
            throw CsiException.invalidArgument("volume name '" + CsiException.printable(name)
                    + "' is not allowed: 1 to 128 letters, digits, '.', '_' and '-', starting with a letter or digit");
        }
    }

    /** The id parsed, or empty for an id this driver never hands out (the caller answers NOT_FOUND). */
    public static Optional<LocalVolumeId> parse(String id) {
        String[] parts = id.split("/", -1);
        if (parts.length != 3 || !parts[0].equals(LOCAL)
                || !NODE_ID.matcher(parts[1]).matches() || !NAME.matcher(parts[2]).matches()) {
            return Optional.empty();
        }
        return Optional.of(new LocalVolumeId(parts[1], parts[2]));
    }

    /** Like {@link #parse}, but NOT_FOUND for an id this driver never handed out. */
    public static LocalVolumeId require(String id) {
        return parse(id).orElseThrow(() -> CsiException.notFound("volume " + CsiException.printable(id) + " does not exist"));
    }

    @Override
    public String toString() {
        return LOCAL + "/" + nodeId + "/" + name;
    }
}
