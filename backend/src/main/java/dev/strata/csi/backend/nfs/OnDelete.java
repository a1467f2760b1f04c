package dev.strata.csi.backend.nfs;

import dev.strata.csi.rpc.CsiException;
import java.util.Arrays;
import java.util.Locale;

/** What DeleteVolume does with an NFS volume's directory: the StorageClass parameter {@code onDelete}. */
public enum OnDelete {
    /** The directory and everything in it is removed. */
    DELETE,
    /** The directory is left as it is; only the driver's record of the volume goes. */
    RETAIN,
    /** The directory is renamed to {@code archived-<name>-<UTC time>} beside it. */
    ARCHIVE;

    public static final String PARAMETER = "onDelete";

    public String value() {
        return name().toLowerCase(Locale.ROOT);
    }

    public static OnDelete of(String value) {
        return Arrays.stream(values()).filter(mode -> mode.value().equals(value)).findFirst()
                .orElseThrow(() -> CsiException.invalidArgument("parameter " + PARAMETER + " must be delete, retain or archive, got '"
                        + CsiException.printable(value) + "'"));
    }
}
