package dev.strata.csi.mount;

import java.util.ArrayList;
import java.util.List;

/**
 * mount(8)'s command line, for the filesystems mounted through a helper program (mount.nfs...):
 * the type, the options joined, and the source and target after {@code --}, so neither can be
 * read as an option.
 */
public final class MountCommand {

    private MountCommand() {}

    public static String[] argv(String fsType, List<String> options, String source, String target) throws MountException {
        List<String> argv = new ArrayList<>(List.of("mount", "-t", fsType));
        if (!options.isEmpty()) {
            argv.addAll(List.of("-o", MountOptions.join(options)));
        }
        argv.addAll(List.of("--", source, target));
        return argv.toArray(String[]::new);
    }
}
