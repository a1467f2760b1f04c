package dev.strata.csi.testing;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** For tests that mount, attach loop devices and format: they need root, and CI runs them as root. */
public final class Root {

    private Root() {}

    /** Fails (never skips) the test when not root, so a CI that lost root cannot pass by testing nothing. */
    public static void require() {
        try {
            // /proc/self belongs to the process's effective user.
            if (!Integer.valueOf(0).equals(Files.getAttribute(Path.of("/proc/self"), "unix:uid"))) {
                fail("this test mounts filesystems and attaches loop devices, so it must run as root (CI does)");
            }
        } catch (IOException e) {
            fail("cannot tell whether this test runs as root: " + e.getMessage());
        }
    }
}
