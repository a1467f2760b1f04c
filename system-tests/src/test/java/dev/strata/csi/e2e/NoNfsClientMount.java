package dev.strata.csi.e2e;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

/**
 * A stand-in for mount(8) on a node without an NFS client, as this kernel is: an NFS mount is
 * recorded (its command line, one a line) and fails as mount.nfs does there (exit 32, "no NFS
 * client"); every other mount passes to the real tool. node-server finds it first on its PATH.
 */
final class NoNfsClientMount {

    private NoNfsClientMount() {}

    /** Writes the stand-in into {@code dir}/fake-bin and returns that directory, to go first on node-server's PATH. */
    static Path install(Path dir, Path mountLog) throws Exception {
        Path fakeBin = Files.createDirectories(dir.resolve("fake-bin"));
        Path fakeMount = fakeBin.resolve("mount");
        Files.writeString(fakeMount, """
                #!/bin/sh
                # FAKE mount(8) for the e2e tests: records NFS mounts and fails them like a machine without an NFS client.
                for arg in "$@"; do
                  if [ "$arg" = nfs ]; then
                    printf '%%s\\n' "$*" >> '%s'
                    echo "mount: fake: this kernel has no NFS client" >&2
                    exit 32
                  fi
                done
                exec '%s' "$@"
                """.formatted(mountLog, realTool("mount")));
        Files.setPosixFilePermissions(fakeMount, PosixFilePermissions.fromString("rwxr-xr-x"));
        return fakeBin;
    }

    private static String realTool(String name) {
        for (String dir : System.getenv("PATH").split(":")) {
            Path tool = Path.of(dir, name);
            if (Files.isExecutable(tool)) {
                return tool.toString();
            }
        }
        throw new AssertionError(name + " not found on PATH");
    }
}
