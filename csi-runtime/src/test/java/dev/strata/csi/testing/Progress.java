package dev.strata.csi.testing;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/**
 * Progress lines of a long suite, on the console as well as in its report. Surefire keeps a test's
 * System.out and System.err in the report's output file (redirectTestOutputToFile), so a suite of
 * minutes would be silent on the console; what a forked test JVM writes to its own stderr file
 * descriptor, surefire passes to the console line by line.
 */
public final class Progress {

    /** The forked JVM's stderr itself, beside System.err, which surefire redirects. Never closed: it is fd 2. */
    private static final PrintStream CONSOLE = new PrintStream(new FileOutputStream(FileDescriptor.err), true, StandardCharsets.UTF_8);

    private Progress() {}

    public static void line(String format, Object... args) {
        String line = String.format(format, args);
        CONSOLE.println(line);
        System.out.println(line);
    }
}
