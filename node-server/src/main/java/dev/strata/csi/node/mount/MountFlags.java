package dev.strata.csi.node.mount;

import dev.strata.csi.mount.MountException;
import dev.strata.csi.mount.MountOptions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Mount options (as {@code mount -o} takes them) turned into what mount(2) takes, the way
 * util-linux's mount(8) does it: the filesystem-independent options become MS_* flags, applied in
 * order so that a later option overrides an earlier one ({@code ro,rw} is writable); options only
 * mount(8) itself reads are dropped; propagation options become separate calls after the mount;
 * everything else is the filesystem's own and goes, in order, into the data string.
 *
 * @param flags       the MS_* flags of the mount call
 * @param data        comma-separated filesystem options, or null when there are none
 * @param propagation MS_SHARED, MS_PRIVATE, ... (with MS_REC for the r- forms), one call each, in order
 */
public record MountFlags(long flags, String data, List<Long> propagation) {

    // linux/mount.h
    public static final long MS_RDONLY = 1;
    public static final long MS_NOSUID = 2;
    public static final long MS_NODEV = 4;
    public static final long MS_NOEXEC = 8;
    public static final long MS_SYNCHRONOUS = 16;
    public static final long MS_REMOUNT = 32;
    public static final long MS_MANDLOCK = 64;
    public static final long MS_DIRSYNC = 128;
    public static final long MS_NOSYMFOLLOW = 256;
    public static final long MS_NOATIME = 1024;
    public static final long MS_NODIRATIME = 2048;
    public static final long MS_BIND = 4096;
    public static final long MS_REC = 16384;
    public static final long MS_SILENT = 32768;
    public static final long MS_UNBINDABLE = 1 << 17;
    public static final long MS_PRIVATE = 1 << 18;
    public static final long MS_SLAVE = 1 << 19;
    public static final long MS_SHARED = 1 << 20;
    public static final long MS_RELATIME = 1 << 21;
    public static final long MS_I_VERSION = 1 << 23;
    public static final long MS_STRICTATIME = 1 << 24;
    public static final long MS_LAZYTIME = 1 << 25;

    public MountFlags {
        propagation = List.copyOf(propagation);
    }

    /** An option's effect on the flags: bits it sets, bits it clears. */
    private record Effect(long set, long clear) {
        static Effect sets(long bits) {
            return new Effect(bits, 0);
        }

        static Effect clears(long bits) {
            return new Effect(0, bits);
        }
    }

    /** The filesystem-independent options of mount(8), with the flag each sets or clears. */
    private static final Map<String, Effect> GENERIC = Map.ofEntries(
            Map.entry("ro", Effect.sets(MS_RDONLY)), Map.entry("rw", Effect.clears(MS_RDONLY)),
            Map.entry("nosuid", Effect.sets(MS_NOSUID)), Map.entry("suid", Effect.clears(MS_NOSUID)),
            Map.entry("nodev", Effect.sets(MS_NODEV)), Map.entry("dev", Effect.clears(MS_NODEV)),
            Map.entry("noexec", Effect.sets(MS_NOEXEC)), Map.entry("exec", Effect.clears(MS_NOEXEC)),
            Map.entry("sync", Effect.sets(MS_SYNCHRONOUS)), Map.entry("async", Effect.clears(MS_SYNCHRONOUS)),
            Map.entry("dirsync", Effect.sets(MS_DIRSYNC)),
            Map.entry("mand", Effect.sets(MS_MANDLOCK)), Map.entry("nomand", Effect.clears(MS_MANDLOCK)),
            Map.entry("nosymfollow", Effect.sets(MS_NOSYMFOLLOW)), Map.entry("symfollow", Effect.clears(MS_NOSYMFOLLOW)),
            Map.entry("noatime", Effect.sets(MS_NOATIME)), Map.entry("atime", Effect.clears(MS_NOATIME)),
            Map.entry("nodiratime", Effect.sets(MS_NODIRATIME)), Map.entry("diratime", Effect.clears(MS_NODIRATIME)),
            Map.entry("relatime", Effect.sets(MS_RELATIME)), Map.entry("norelatime", Effect.clears(MS_RELATIME)),
            Map.entry("strictatime", Effect.sets(MS_STRICTATIME)), Map.entry("nostrictatime", Effect.clears(MS_STRICTATIME)),
            Map.entry("lazytime", Effect.sets(MS_LAZYTIME)), Map.entry("nolazytime", Effect.clears(MS_LAZYTIME)),
            Map.entry("iversion", Effect.sets(MS_I_VERSION)), Map.entry("noiversion", Effect.clears(MS_I_VERSION)),
            Map.entry("silent", Effect.sets(MS_SILENT)), Map.entry("loud", Effect.clears(MS_SILENT)),
            // mount(8): user and users imply noexec, nosuid and nodev; owner and group nosuid and nodev
            // (a later exec, suid or dev still wins).
            Map.entry("user", Effect.sets(MS_NOEXEC | MS_NOSUID | MS_NODEV)),
            Map.entry("users", Effect.sets(MS_NOEXEC | MS_NOSUID | MS_NODEV)),
            Map.entry("owner", Effect.sets(MS_NOSUID | MS_NODEV)),
            Map.entry("group", Effect.sets(MS_NOSUID | MS_NODEV)));

    /** Options only mount(8) reads (fstab and permission matters); the kernel never sees them. */
    private static final Set<String> USERSPACE = Set.of("defaults", "auto", "noauto", "nouser", "_netdev", "nofail");

    private static final Map<String, Long> PROPAGATION = Map.of(
            "shared", MS_SHARED, "rshared", MS_SHARED | MS_REC,
            "slave", MS_SLAVE, "rslave", MS_SLAVE | MS_REC,
            "private", MS_PRIVATE, "rprivate", MS_PRIVATE | MS_REC,
            "unbindable", MS_UNBINDABLE, "runbindable", MS_UNBINDABLE | MS_REC);

    /** The mount(2) arguments for {@code options}, which are checked first ({@link MountOptions}). */
    public static MountFlags of(List<String> options) throws MountException {
        MountOptions.join(options);
        long flags = 0;
        List<String> data = new ArrayList<>();
        List<Long> propagation = new ArrayList<>();
        for (String option : options) {
            Effect effect = GENERIC.get(option);
            if (effect != null) {
                flags = (flags & ~effect.clear()) | effect.set();
            } else if (PROPAGATION.containsKey(option)) {
                propagation.add(PROPAGATION.get(option));
            } else if (!USERSPACE.contains(option) && !option.startsWith("comment=") && !option.startsWith("x-")) {
                data.add(option);
            }
        }
        return new MountFlags(flags, data.isEmpty() ? null : String.join(",", data), propagation);
    }
}
