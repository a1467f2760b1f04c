package dev.strata.csi.backend.local;

import dev.strata.csi.rpc.CsiException;
import java.util.Optional;

/**
 * The snapshot id the driver hands out: {@code local-snapshot/<node-id>/<name>}. Like a volume id
 * it names the node whose pool holds the snapshot, so any controller replica routes a call to
 * that node's agent without state of its own, and the name, which is the snapshot's file name in
 * the pool's snapshot area. Names follow the rules of volume names.
 */
public record LocalSnapshotId(String nodeId, String name) {

    private static final String SCHEME = "local-snapshot";
    /** What every id starts with. */
    public static final String PREFIX = SCHEME + "/";

    public LocalSnapshotId {
        if (!LocalVolumeId.NODE_ID.matcher(nodeId).matches()) {
            throw new IllegalArgumentException("not a node id: " + nodeId);
        }
        if (!LocalVolumeId.NAME.matcher(name).matches()) {
            throw new IllegalArgumentException("not a snapshot name: " + name);
        }
    }

    /** INVALID_ARGUMENT unless {@code name} may name a snapshot. */
    public static void checkName(String name) {
        if (!LocalVolumeId.NAME.matcher(name).matches()) {
            throw CsiException.invalidArgument("snapshot name '" + CsiException.printable(name)
                    + "' is not allowed: 1 to 128 letters, digits, '.', '_' and '-', starting with a letter or digit");
        }
    }

    /** The id parsed, or empty for an id this driver never hands out. */
    public static Optional<LocalSnapshotId> parse(String id) {
        String[] parts = id.split("/", -1);
        if (parts.length != 3 || !parts[0].equals(SCHEME)
                || !LocalVolumeId.NODE_ID.matcher(parts[1]).matches() || !LocalVolumeId.NAME.matcher(parts[2]).matches()) {
            return Optional.empty();
        }
        return Optional.of(new LocalSnapshotId(parts[1], parts[2]));
    }

    @Override
    public String toString() {
        return SCHEME + "/" + nodeId + "/" + name;
    }
}
