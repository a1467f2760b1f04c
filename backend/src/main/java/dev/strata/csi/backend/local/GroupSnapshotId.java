package dev.strata.csi.backend.local;

import dev.strata.csi.rpc.CsiException;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The group snapshot id the driver hands out: {@code local-group-snapshot/<name>}. Unlike a
 * snapshot id it names no node: a group's members may be on several. Its members are ordinary
 * snapshots named {@code <name>-<n>} in the order of their volume ids, each on its volume's node,
 * each record holding the whole group; the name leaves room for that suffix.
 */
public record GroupSnapshotId(String name) {

    private static final String SCHEME = "local-group-snapshot";
    /** 128, a snapshot name's longest, less a member's suffix of up to 7 characters. */
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9][A-Za-z0-9._-]{0,120}");

    /** INVALID_ARGUMENT unless {@code name} may name a group snapshot. */
    public static void checkName(String name) {
        if (!NAME.matcher(name).matches()) {
            throw CsiException.invalidArgument("group snapshot name '" + CsiException.printable(name)
                    + "' is not allowed: 1 to 121 letters, digits, '.', '_' and '-', starting with a letter or digit");
        }
    }

    /** The id parsed, or empty for an id this driver never hands out. */
    public static Optional<GroupSnapshotId> parse(String id) {
        String[] parts = id.split("/", -1);
        if (parts.length != 2 || !parts[0].equals(SCHEME) || !NAME.matcher(parts[1]).matches()) {
            return Optional.empty();
        }
        return Optional.of(new GroupSnapshotId(parts[1]));
    }

    /** The name of the member snapshot of the {@code index}th volume, in the order of the volume ids. */
    public String member(int index) {
        return name + "-" + index;
    }

    @Override
    public String toString() {
        return SCHEME + "/" + name;
    }
}
