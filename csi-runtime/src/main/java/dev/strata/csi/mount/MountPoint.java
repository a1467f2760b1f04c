package dev.strata.csi.mount;

import java.nio.file.Path;
import java.util.List;

/**
 * One mount, as a line of {@code /proc/self/mountinfo} describes it (proc(5)).
 *
 * @param root         the directory of the mounted filesystem that appears at {@code mountPoint}
 *                     ({@code "/"} unless it is a bind mount of a subdirectory); a path inside
 *                     that filesystem, not on this host, hence a string
 * @param options      per-mount options, such as {@code ro} on a read-only bind mount
 * @param superOptions options of the filesystem itself, shared by all its mounts
 */
public record MountPoint(int id, int parentId, DeviceNumber device, String root, Path mountPoint,
        List<String> options, String fsType, String source, List<String> superOptions) {

    public MountPoint {
        options = List.copyOf(options);
        superOptions = List.copyOf(superOptions);
    }

    /** Whether writes through this mount fail, whatever the filesystem allows. */
    public boolean readOnly() {
        return options.contains("ro");
    }

    /**
     * Parses one line: {@code id parent major:minor root mountpoint options [optional...] - fstype source superoptions}.
     */
    static MountPoint parse(String line) {
        String[] fields = line.split(" ", -1);
        // Optional fields (shared:1, master:2, ...) come between the options and a lone "-".
        int separator = 6;
        while (separator < fields.length && !fields[separator].equals("-")) {
            separator++;
        }
        if (fields.length - separator != 4) {
            throw new IllegalArgumentException("not a mountinfo line: " + line);
        }
        try {
            return new MountPoint(
                    Integer.parseInt(fields[0]),
                    Integer.parseInt(fields[1]),
                    DeviceNumber.parse(fields[2]),
                    unescape(fields[3]),
                    Path.of(unescape(fields[4])),
                    options(fields[5]),
                    unescape(fields[separator + 1]),
                    unescape(fields[separator + 2]),
                    options(fields[separator + 3]));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("not a mountinfo line: " + line, e);
        }
    }

    private static List<String> options(String field) {
        return field.isEmpty() ? List.of() : List.of(field.split(","));
    }

    /** The kernel writes space, tab, newline and backslash in paths as three octal digits: {@code \040}. */
    private static String unescape(String field) {
        if (field.indexOf('\\') < 0) {
            return field;
        }
        StringBuilder out = new StringBuilder(field.length());
        for (int i = 0; i < field.length(); i++) {
            char c = field.charAt(i);
            if (c == '\\' && i + 3 < field.length() && isOctal(field, i + 1)) {
                out.append((char) Integer.parseInt(field.substring(i + 1, i + 4), 8));
                i += 3;
            } else {
                out.append(c);
            }
        }
        return out.toString();
    }

    private static boolean isOctal(String text, int from) {
        for (int i = from; i < from + 3; i++) {
            if (text.charAt(i) < '0' || text.charAt(i) > '7') {
                return false;
            }
        }
        return true;
    }
}
