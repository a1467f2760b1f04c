package dev.strata.csi.backend.nfs;

import dev.strata.csi.rpc.CsiException;
import java.util.Optional;

/**
 * The id of a snapshot of an NFS volume: {@code nfs-snapshot/<server>/<share>/<name>}, share and
 * name percent-encoded as in {@link NfsVolumeId}, and only the canonical encoding parses, so one
 * snapshot has exactly one id. The snapshot lives in the driver's directory of the export it names
 * (the source volume's), under its CreateSnapshot name, which the cluster keeps unique; the id holds
 * all a controller needs to find it, so any replica can, with no state of its own.
 */
public record NfsSnapshotId(NfsVolume export, String name) {

    private static final String PREFIX = "nfs-snapshot";
    private static final int MAX_NAME = 255;

    public NfsSnapshotId {
        if (!export.subDir().isEmpty()) {
            throw new IllegalArgumentException("a snapshot id names an export, not a directory of it: " + export.source());
        }
        checkName(name);
    }

    /** INVALID_ARGUMENT for a CreateSnapshot name this driver cannot keep: empty, too long, or with a control character. */
    public static void checkName(String name) {
        if (name.isEmpty() || name.length() > MAX_NAME || name.chars().anyMatch(c -> c < ' ' || c == 0x7f)) {
            throw CsiException.invalidArgument("snapshot name '" + CsiException.printable(name)
                    + "' must be 1 to " + MAX_NAME + " characters without control characters");
        }
    }

    @Override
    public String toString() {
        return String.join("/", PREFIX, export.server(), NfsVolumeId.encode(export.share()), NfsVolumeId.encode(name));
    }

    /** The id parsed, or empty for a string that is not an NFS snapshot id of this driver. */
    public static Optional<NfsSnapshotId> parse(String id) {
        String[] parts = id.split("/", -1);
        if (parts.length != 4 || !parts[0].equals(PREFIX)) {
            return Optional.empty();
        }
        try {
            NfsSnapshotId parsed = new NfsSnapshotId(new NfsVolume(parts[1], NfsVolumeId.decode(parts[2]), ""), NfsVolumeId.decode(parts[3]));
            return parsed.toString().equals(id) ? Optional.of(parsed) : Optional.empty();
        } catch (RuntimeException e) { // a bad escape, a share that is no absolute path, a bad name
            return Optional.empty();
        }
    }
}
