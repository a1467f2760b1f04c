package dev.strata.csi.log;

import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import jnr.posix.POSIX;
import jnr.posix.POSIXFactory;

/**
 * The process's console with {@code --log-format=json}: every line on stdout and stderr is one
 * JSON object. The log writes to a duplicate of the original stderr; file descriptors 1 and 2
 * become pipes whose lines a thread each turns into log lines, so that what the JVM and the
 * JDK write there themselves (JDK 24+ warns on sun.misc.Unsafe, which protobuf and jffi call,
 * through a stream of its own) comes out as JSON too; System.out and System.err become log
 * streams directly, so that a line printed just before the process halts is not lost in a pipe.
 */
public final class JsonConsole {

    private JsonConsole() {}

    /** Takes over the console and returns the log that writes to it. */
    public static Log install(int verbosity) {
        POSIX posix = POSIXFactory.getNativePOSIX();
        int original = posix.dup(2);
        Log log = new Log(original < 0 ? System.err
                : new PrintStream(new Descriptor(posix, original), true, StandardCharsets.UTF_8), verbosity, LogFormat.JSON);
        if (original >= 0) {
            capture(posix, 1, new LoggedStream(log, "stdout", false));
            capture(posix, 2, new LoggedStream(log, "stderr", true));
        }
        System.setOut(new PrintStream(new LoggedStream(log, "stdout", false), true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(new LoggedStream(log, "stderr", true), true, StandardCharsets.UTF_8));
        return log;
    }

    /** Makes {@code fd} the write end of a pipe whose lines become log lines. */
    private static void capture(POSIX posix, int fd, LoggedStream into) {
        int[] pipe = new int[2];
        if (posix.pipe(pipe) != 0 || posix.dup2(pipe[1], fd) < 0) {
            return; // the console stays as it was: better than no output
        }
        posix.close(pipe[1]);
        Thread.ofPlatform().daemon().name("console-" + fd).start(() -> {
            byte[] buffer = new byte[8192];
            int read;
            while ((read = posix.read(pipe[0], buffer, buffer.length)) > 0 || (read < 0 && posix.errno() == 4 /* EINTR */)) {
                if (read > 0) {
                    into.write(buffer, 0, read);
                }
            }
        });
    }

    /** Writes to a file descriptor Java has no FileDescriptor for. */
    private static final class Descriptor extends OutputStream {
        private final POSIX posix;
        private final int fd;

        Descriptor(POSIX posix, int fd) {
            this.posix = posix;
            this.fd = fd;
        }

        @Override
        public void write(int b) {
            write(new byte[] {(byte) b}, 0, 1);
        }

        @Override
        public void write(byte[] bytes, int offset, int length) {
            byte[] rest = java.util.Arrays.copyOfRange(bytes, offset, offset + length);
            while (rest.length > 0) {
                int written = posix.write(fd, rest, rest.length);
                if (written < 0 && posix.errno() == 4 /* EINTR */) {
                    continue;
                }
                if (written <= 0) {
                    return; // stderr is gone: nowhere left to say so
                }
                rest = java.util.Arrays.copyOfRange(rest, written, rest.length);
            }
        }
    }
}
