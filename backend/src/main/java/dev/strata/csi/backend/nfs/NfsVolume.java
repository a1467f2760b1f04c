package dev.strata.csi.backend.nfs;

import dev.strata.csi.rpc.CsiException;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Where an NFS volume's data is: a subdirectory of an export. Every part is checked when the value
 * is made, so a value of this type can be joined to a path without leaving the export.
 *
 * @param server the NFS server: a host name, an IPv4 address, or an IPv6 address in brackets
 * @param share  the exported path on the server: absolute, normalized, no trailing '/'
 * @param subDir the volume's directory below the share: relative, normalized; empty for the whole
 *               share (static volumes only)
 */
public record NfsVolume(String server, String share, String subDir) {

    /** The volume context keys: the StorageClass parameter names, and a static PV's volumeAttributes. */
    public static final String SERVER = "server";
    public static final String SHARE = "share";
    public static final String SUB_DIR = "subDir";

    /**
     * The driver's own directory in every export it provisions on; no volume can be made there, so
     * no volume can be made over the driver's records.
     */
    public static final String RESERVED = ".strata-csi";

    private static final Pattern HOST = Pattern.compile("[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?");
    private static final Pattern IPV6 = Pattern.compile("\\[[0-9A-Fa-f:.]{2,45}\\]");
    private static final int MAX_PATH = 1024;
    private static final int MAX_SEGMENT = 255;

    public NfsVolume {
        checkServer(server);
        checkPath(SHARE, share, true);
        checkPath(SUB_DIR, subDir, false);
        if (!subDir.isEmpty() && subDir.split("/")[0].equals(RESERVED)) {
            throw CsiException.invalidArgument(SUB_DIR + " '" + subDir + "' is the driver's own directory");
        }
    }

    /** The volume described by a volume context (a static PV's volumeAttributes), or empty when it names no server. */
    public static Optional<NfsVolume> fromContext(Map<String, String> context) {
        if (!context.containsKey(SERVER) && !context.containsKey(SHARE)) {
            return Optional.empty();
        }
        String server = context.getOrDefault(SERVER, "");
        String share = context.getOrDefault(SHARE, "");
        if (server.isEmpty() || share.isEmpty()) {
            throw CsiException.invalidArgument("an NFS volume needs both '" + SERVER + "' and '" + SHARE + "'");
        }
        return Optional.of(new NfsVolume(server, stripTrailingSlash(share), stripTrailingSlash(context.getOrDefault(SUB_DIR, ""))));
    }

    /** What mount.nfs takes: {@code server:/share/subDir}. */
    public String source() {
        String path = subDir.isEmpty() ? share : share.equals("/") ? "/" + subDir : share + "/" + subDir;
        return server + ":" + path;
    }

    /** The export, without the subdirectory. */
    public NfsVolume export() {
        return new NfsVolume(server, share, "");
    }

    private static void checkServer(String server) {
        if (!HOST.matcher(server).matches() && !IPV6.matcher(server).matches()) {
            throw CsiException.invalidArgument(SERVER + " '" + CsiException.printable(server)
                    + "' is not a host name, an IPv4 address or a bracketed IPv6 address");
        }
    }

    /**
     * A path made of plain segments: no '.', '..', empty segment or control character, each
     * segment a possible file name. An absolute path (the share) starts with '/'; a relative one
     * (subDir) does not, and may be empty.
     */
    private static void checkPath(String field, String path, boolean absolute) {
        String problem = null;
        if (path.length() > MAX_PATH) {
            problem = "is longer than " + MAX_PATH + " characters";
        } else if (absolute && !path.startsWith("/")) {
            problem = "must be an absolute path";
        } else if (!absolute && path.startsWith("/")) {
            problem = "must be relative to the share";
        } else if (path.chars().anyMatch(c -> c < ' ' || c == 0x7f)) {
            problem = "contains a control character";
        } else if (!(absolute ? path.equals("/") : path.isEmpty())) {
            for (String segment : (absolute ? path.substring(1) : path).split("/", -1)) {
                if (segment.isEmpty() || segment.equals(".") || segment.equals("..")) {
                    problem = "has an empty, '.' or '..' segment";
                } else if (segment.length() > MAX_SEGMENT) {
                    problem = "has a segment longer than " + MAX_SEGMENT + " characters";
                }
            }
        }
        if (problem != null) {
            throw CsiException.invalidArgument(field + " '" + CsiException.printable(path) + "' " + problem);
        }
    }

    private static String stripTrailingSlash(String path) {
        return path.length() > 1 && path.endsWith("/") ? path.substring(0, path.length() - 1) : path;
    }
}
