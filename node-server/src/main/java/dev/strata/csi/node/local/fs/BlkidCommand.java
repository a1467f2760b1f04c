package dev.strata.csi.node.local.fs;

import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.system.Commands;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/** {@link SignatureProbe} by running blkid(8): where libblkid cannot be loaded into the process. */
final class BlkidCommand implements SignatureProbe {

    private static final Duration TIMEOUT = Duration.ofMinutes(1);

    /** blkid's exit code when it recognises nothing. */
    private static final int NOTHING_FOUND = 2;

    private final Commands commands;

    BlkidCommand(Commands commands) {
        this.commands = commands;
    }

    @Override
    public Optional<String> probe(Path device) throws DeviceException {
        String path = device.toAbsolutePath().normalize().toString();
        CommandResult result;
        try {
            // -p reads the device itself, not blkid's cache, which can be stale.
            result = commands.run(TIMEOUT, "blkid", "-p", "-o", "export", "--", path);
            if (result.exitCode() == NOTHING_FOUND) {
                return Optional.empty();
            }
            result.check("blkid -p " + path);
        } catch (CommandException e) {
            throw new DeviceException(e.getMessage(), e);
        }
        Map<String, String> found = result.stdout().lines()
                .filter(line -> line.indexOf('=') > 0)
                .collect(Collectors.toMap(line -> line.substring(0, line.indexOf('=')),
                        line -> line.substring(line.indexOf('=') + 1), (first, second) -> first));
        // blkid succeeded, so something is there even if it has no type name.
        return Optional.of(Stream.of("TYPE", "PTTYPE").map(found::get).filter(type -> type != null && !type.isEmpty())
                .findFirst().orElse("unknown"));
    }
}
