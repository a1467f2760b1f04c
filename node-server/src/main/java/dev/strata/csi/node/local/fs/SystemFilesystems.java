package dev.strata.csi.node.local.fs;

import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.system.Commands;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;
import java.util.stream.Stream;

/** {@link Filesystems} with blkid's probe and the mkfs tools. */
public final class SystemFilesystems implements Filesystems {

    private static final Duration FORMAT_TIMEOUT = Duration.ofMinutes(10);

    /**
     * The filesystems the driver creates and how. None is forced (no -F/-f): mkfs.xfs and
     * mkfs.btrfs then refuse a device with a filesystem, mke2fs one that is mounted. Discard is skipped because a new image file is
     * sparse already; ext4 reserves no blocks for root, since the whole volume is the user's, and
     * leaves inode table and journal initialisation to the kernel after mount.
     */
    private static final Map<String, List<String>> MKFS = Map.of(
            "ext4", List.of("mkfs.ext4", "-q", "-m", "0", "-E", "nodiscard,lazy_itable_init=1,lazy_journal_init=1"),
            "xfs", List.of("mkfs.xfs", "-q", "-K"),
            "btrfs", List.of("mkfs.btrfs", "-q", "-K"));

    private final Commands commands;
    private final SignatureProbe signatures;

    /** Probing with the blkid program. */
    public SystemFilesystems(Commands commands) {
        this(commands, new BlkidCommand(commands));
    }

    /** Probing with libblkid in the process where it can be loaded, else with the blkid program. */
    public static SystemFilesystems preferringLibblkid(Commands commands) {
        SignatureProbe probe = Libblkid.load().<SignatureProbe>map(library -> library).orElseGet(() -> new BlkidCommand(commands));
        return new SystemFilesystems(commands, probe);
    }

    SystemFilesystems(Commands commands, SignatureProbe signatures) {
        this.commands = commands;
        this.signatures = signatures;
    }

    @Override
    public Optional<String> probe(Path device) throws DeviceException {
        return signatures.probe(device);
    }

    @Override
    public Optional<String> formatIfBlank(Path device, String fsType) throws DeviceException {
        List<String> mkfs = MKFS.get(fsType);
        if (mkfs == null) {
            throw new UnsupportedFilesystemException("cannot create filesystem type \"" + fsType + "\"; supported: "
                    + String.join(", ", new TreeSet<>(MKFS.keySet())));
        }
        String path = absolute(device);
        Optional<String> existing = probe(device);
        if (existing.isPresent()) {
            return existing;
        }
        String[] argv = Stream.concat(mkfs.stream(), Stream.of(path)).toArray(String[]::new);
        DeviceException.check(run(FORMAT_TIMEOUT, argv), mkfs.getFirst() + " " + path);
        return Optional.empty();
    }

    @Override
    public void grow(Path device, Path mountPoint, String fsType) throws DeviceException {
        String mounted = mountPoint.toAbsolutePath().normalize().toString();
        String[] argv = switch (fsType) {
            case "ext4" -> new String[] {"resize2fs", absolute(device)};
            case "xfs" -> new String[] {"xfs_growfs", "-d", mounted};
            case "btrfs" -> new String[] {"btrfs", "filesystem", "resize", "max", mounted};
            default -> throw new UnsupportedFilesystemException("cannot grow filesystem type \"" + fsType + "\"; supported: "
                    + String.join(", ", new TreeSet<>(MKFS.keySet())));
        };
        DeviceException.check(run(FORMAT_TIMEOUT, argv), String.join(" ", argv));
    }

    private CommandResult run(Duration timeout, String... argv) throws DeviceException {
        try {
            return commands.run(timeout, argv);
        } catch (CommandException e) {
            throw new DeviceException(e.getMessage(), e);
        }
    }

    private static String absolute(Path device) {
        // mkfs takes no "--"; an absolute path cannot be mistaken for an option.
        return device.toAbsolutePath().normalize().toString();
    }
}
