package dev.strata.csi.mount;

import dev.strata.csi.rpc.CsiException;
import java.util.List;
import java.util.Set;

/**
 * Mount options as they reach {@code mount -o}. They come from requests (a StorageClass's
 * mountOptions, a volume capability's mount flags), so each one is checked before it goes near a
 * command line: it must stay one option and can never become an argument of its own.
 */
public final class MountOptions {

    private MountOptions() {}

    /** The options as the single value of {@code -o}, or an exception naming the first bad one. */
    public static String join(List<String> options) throws MountException {
        for (String option : options) {
            check(option);
        }
        return String.join(",", options);
    }

    /**
     * Options that make mount(8) set up a loop device of its own, run a helper program, or turn
     * the call into another kind of mount: with them a volume could escape the driver's view of
     * which device is in use.
     */
    private static final Set<String> REFUSED = Set.of("loop", "bind", "rbind", "move", "remount", "helper",
            "offset", "sizelimit", "encryption", "x-mount.mkdir", "x-mount.subdir");

    private static void check(String option) throws MountException {
        String name = option.contains("=") ? option.substring(0, option.indexOf('=')) : option;
        String problem = option.isEmpty() ? "is empty"
                : option.indexOf(',') >= 0 ? "contains a comma, so it would be several options"
                : option.startsWith("-") ? "starts with '-'"
                : option.chars().anyMatch(Character::isISOControl) ? "contains a control character"
                : REFUSED.contains(name) || name.startsWith("x-mount.") ? "is not allowed for a volume"
                : null;
        if (problem != null) {
            throw new MountException("mount option \"" + CsiException.printable(option) + "\" " + problem);
        }
    }
}
