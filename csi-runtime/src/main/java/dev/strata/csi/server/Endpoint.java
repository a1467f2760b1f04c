package dev.strata.csi.server;

import dev.strata.csi.flags.UsageException;
import java.nio.file.Path;

/**
 * Where a server listens: a unix domain socket, written the way every CSI driver and sidecar
 * writes it ({@code unix:///csi/csi.sock}). A bare absolute path is accepted as well.
 */
public record Endpoint(Path socket) {

    private static final String SCHEME = "unix://";

    public static Endpoint parse(String value) throws UsageException {
        String path;
        if (value.startsWith(SCHEME)) {
            path = value.substring(SCHEME.length());
        } else if (value.startsWith("unix:")) {
            path = value.substring("unix:".length());
        } else if (value.contains("://")) {
            throw new UsageException("endpoint '" + value + "' is not a unix socket; expected unix:///path/csi.sock");
        } else {
            path = value;
        }
        if (!path.startsWith("/")) {
            throw new UsageException("endpoint '" + value + "' needs an absolute socket path, as in unix:///csi/csi.sock");
        }
        if (path.indexOf('\0') >= 0) {
            throw new UsageException("endpoint contains a NUL byte");
        }
        // The kernel limits sun_path to 108 bytes including the terminating NUL.
        if (path.getBytes(java.nio.charset.StandardCharsets.UTF_8).length > 107) {
            throw new UsageException("endpoint socket path is longer than the 107 bytes a unix socket allows: " + path);
        }
        return new Endpoint(Path.of(path).normalize());
    }

    @Override
    public String toString() {
        return "unix://" + socket;
    }
}
