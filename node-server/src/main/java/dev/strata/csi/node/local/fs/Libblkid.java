package dev.strata.csi.node.local.fs;

import dev.strata.csi.linux.SyscallException;
import dev.strata.csi.node.local.DeviceException;
import java.nio.file.Path;
import java.util.Optional;
import jnr.ffi.LibraryLoader;
import jnr.ffi.Pointer;
import jnr.ffi.Runtime;
import jnr.ffi.annotations.Out;
import jnr.ffi.annotations.SaveError;
import jnr.ffi.byref.PointerByReference;

/**
 * {@link SignatureProbe} with libblkid, the library blkid(8) is made of, loaded into the process:
 * the same low-level probe {@code blkid -p} makes (superblocks of every usage and partition
 * tables, the "safe" probe that refuses to choose between several signatures), without starting
 * a program for it.
 */
final class Libblkid implements SignatureProbe {

    /** The part of libblkid's probing API this needs (blkid.h); public because jnr-ffi implements it. */
    public interface Api {
        @SaveError
        Pointer blkid_new_probe_from_filename(String filename);

        void blkid_free_probe(Pointer probe);

        int blkid_probe_enable_superblocks(Pointer probe, int enable);

        int blkid_probe_set_superblocks_flags(Pointer probe, int flags);

        int blkid_probe_enable_partitions(Pointer probe, int enable);

        int blkid_probe_set_partitions_flags(Pointer probe, int flags);

        int blkid_do_safeprobe(Pointer probe);

        int blkid_probe_lookup_value(Pointer probe, String name, @Out PointerByReference data, Pointer length);
    }

    // blkid.h: what blkid -p asks for
    private static final int BLKID_SUBLKS_LABEL = 1 << 1;
    private static final int BLKID_SUBLKS_UUID = 1 << 3;
    private static final int BLKID_SUBLKS_TYPE = 1 << 5;
    private static final int BLKID_SUBLKS_SECTYPE = 1 << 6;
    private static final int BLKID_SUBLKS_USAGE = 1 << 7;
    private static final int BLKID_SUBLKS_VERSION = 1 << 8;
    private static final int BLKID_PARTS_ENTRY_DETAILS = 1 << 2;

    /** blkid_do_safeprobe's answers. */
    private static final int FOUND = 0;
    private static final int NOTHING = 1;
    private static final int AMBIVALENT = -2;

    private final Api api;
    private final Runtime runtime;

    private Libblkid(Api api) {
        this.api = api;
        this.runtime = Runtime.getRuntime(api);
    }

    /** libblkid, if the C library loader finds libblkid.so.1 (util-linux's libblkid1 package). */
    static Optional<Libblkid> load() {
        try {
            return Optional.of(new Libblkid(LibraryLoader.create(Api.class).failImmediately().load("libblkid.so.1")));
        } catch (LinkageError e) {
            return Optional.empty();
        }
    }

    /** What blkid_do_safeprobe said, and the type it found; {@code errno} when the device could not be opened. */
    private record Outcome(int result, Optional<String> type, int errno) {}

    @Override
    public Optional<String> probe(Path device) throws DeviceException {
        String path = device.toAbsolutePath().normalize().toString();
        String what = "blkid probe of " + path;
        Outcome outcome = safeprobe(path);
        if (outcome.errno() != 0) {
            throw new DeviceException(what + ": cannot open it: " + SyscallException.describe(outcome.errno()));
        }
        return switch (outcome.result()) {
            case NOTHING -> Optional.empty();
            // Something is there even if it has no type name.
            case FOUND -> Optional.of(outcome.type().orElse("unknown"));
            case AMBIVALENT -> throw new DeviceException(what + ": ambivalent result (several signatures, none sure; "
                    + "wipefs shows them)");
            default -> throw new DeviceException(what + ": cannot read it (libblkid says " + outcome.result() + ")");
        };
    }

    /** The probe itself; errno is read on the thread that made the calls, right after them. */
    private Outcome safeprobe(String path) {
        Pointer probe = api.blkid_new_probe_from_filename(path);
        if (probe == null) {
            return new Outcome(-1, Optional.empty(), runtime.getLastError());
        }
        try {
            api.blkid_probe_enable_superblocks(probe, 1);
            api.blkid_probe_set_superblocks_flags(probe, BLKID_SUBLKS_LABEL | BLKID_SUBLKS_UUID | BLKID_SUBLKS_TYPE
                    | BLKID_SUBLKS_SECTYPE | BLKID_SUBLKS_USAGE | BLKID_SUBLKS_VERSION);
            api.blkid_probe_enable_partitions(probe, 1);
            api.blkid_probe_set_partitions_flags(probe, BLKID_PARTS_ENTRY_DETAILS);
            int result = api.blkid_do_safeprobe(probe);
            Optional<String> type = result == FOUND ? value(probe, "TYPE").or(() -> value(probe, "PTTYPE")) : Optional.empty();
            return new Outcome(result, type, 0);
        } finally {
            api.blkid_free_probe(probe);
        }
    }

    private Optional<String> value(Pointer probe, String name) {
        PointerByReference data = new PointerByReference();
        if (api.blkid_probe_lookup_value(probe, name, data, null) != 0 || data.getValue() == null) {
            return Optional.empty();
        }
        String value = data.getValue().getString(0);
        return value.isEmpty() ? Optional.empty() : Optional.of(value);
    }
}
