package dev.strata.csi.log;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * A stream whose every line becomes a log line of its own: with {@code --log-format=json},
 * System.out and System.err are replaced by these, so that whatever else in the process prints
 * (the JDK's own warnings, such as the one on sun.misc.Unsafe, a library, a test crash point)
 * still comes out as one JSON object per line.
 */
public final class LoggedStream extends OutputStream {

    private final Log log;
    private final String stream;
    private final boolean warning;
    private final ByteArrayOutputStream line = new ByteArrayOutputStream();

    /** @param warning lines are logged as warnings (stderr) rather than info (stdout) */
    public LoggedStream(Log log, String stream, boolean warning) {
        this.log = log;
        this.stream = stream;
        this.warning = warning;
    }

    @Override
    public synchronized void write(int b) {
        if (b == '\n') {
            String text = line.toString(StandardCharsets.UTF_8).stripTrailing();
            line.reset();
            if (!text.isEmpty()) {
                if (warning) {
                    log.warn(text, "stream", stream);
                } else {
                    log.info(text, "stream", stream);
                }
            }
        } else {
            line.write(b);
        }
    }

    @Override
    public synchronized void write(byte[] bytes, int offset, int length) {
        for (int i = offset; i < offset + length; i++) {
            write(bytes[i]);
        }
    }
}
