package dev.strata.csi.backend.nfs;

import dev.strata.csi.rpc.CsiException;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import java.util.regex.Pattern;

/** The {@code mountPermissions} of an NFS volume: an octal mode of permission bits, such as 0775. */
public final class FileMode {

    public static final String PARAMETER = "mountPermissions";

    private static final Pattern OCTAL = Pattern.compile("0?[0-7]{3}");

    private FileMode() {}

    /** The mode's bits; INVALID_ARGUMENT for anything but three octal digits (an optional leading 0). */
    public static int parse(String value) {
        if (!OCTAL.matcher(value).matches()) {
            throw CsiException.invalidArgument(PARAMETER + " must be an octal mode of permission bits such as 0775, got '"
                    + CsiException.printable(value) + "' (setuid, setgid and sticky bits are not taken)");
        }
        return Integer.parseInt(value, 8);
    }

    public static String format(int mode) {
        return String.format("0%03o", mode);
    }

    public static Set<PosixFilePermission> permissions(int mode) {
        Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
        PosixFilePermission[] bits = PosixFilePermission.values(); // OWNER_READ first: the highest bit
        for (int i = 0; i < bits.length; i++) {
            if ((mode & (1 << (bits.length - 1 - i))) != 0) {
                set.add(bits[i]);
            }
        }
        return set;
    }
}
