package dev.strata.csi.log;

import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Instant;

/**
 * Structured log lines in logfmt ({@code key=value}, values quoted when needed), one line per
 * event, so that {@code kubectl logs} stays readable and log pipelines can parse it. Verbosity
 * follows the sidecars' {@code --v}: 0 shows info, warnings and errors; 5 adds details such as
 * request bodies (with secrets removed) and health checks.
 */
public final class Log {

    /** Verbosity at which {@link #debug} lines appear. */
    public static final int DEBUG_VERBOSITY = 5;

    private final PrintStream out;
    private final int verbosity;

    public Log(PrintStream out, int verbosity) {
        this.out = out;
        this.verbosity = verbosity;
    }

    public boolean debugEnabled() {
        return verbosity >= DEBUG_VERBOSITY;
    }

    public void debug(String msg, Object... keyValues) {
        if (debugEnabled()) {
            write("DEBUG", msg, null, keyValues);
        }
    }

    public void info(String msg, Object... keyValues) {
        write("INFO", msg, null, keyValues);
    }

    public void warn(String msg, Object... keyValues) {
        write("WARN", msg, null, keyValues);
    }

    public void error(String msg, Object... keyValues) {
        write("ERROR", msg, null, keyValues);
    }

    /** An error with its stack trace, for failures nobody expected; the trace stays in the log, never in a reply. */
    public void error(String msg, Throwable cause, Object... keyValues) {
        write("ERROR", msg, cause, keyValues);
    }

    private void write(String level, String msg, Throwable cause, Object[] keyValues) {
        if (keyValues.length % 2 != 0) {
            throw new IllegalArgumentException("log fields come in key/value pairs");
        }
        StringBuilder line = new StringBuilder(128);
        line.append("time=").append(Instant.now()).append(" level=").append(level).append(" msg=");
        appendValue(line, msg);
        for (int i = 0; i < keyValues.length; i += 2) {
            Object value = keyValues[i + 1];
            if (value == null) {
                continue;
            }
            line.append(' ').append(keyValues[i]).append('=');
            appendValue(line, String.valueOf(value));
        }
        if (cause != null) {
            StringWriter trace = new StringWriter();
            cause.printStackTrace(new PrintWriter(trace));
            line.append(" stack=");
            appendValue(line, trace.toString());
        }
        out.println(line);
    }

    private static void appendValue(StringBuilder line, String value) {
        boolean plain = !value.isEmpty();
        for (int i = 0; i < value.length() && plain; i++) {
            char c = value.charAt(i);
            plain = c > ' ' && c != '"' && c != '=' && c != '\\' && c < 0x7f;
        }
        if (plain) {
            line.append(value);
            return;
        }
        line.append('"');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '"' -> line.append("\\\"");
                case '\\' -> line.append("\\\\");
                case '\n' -> line.append("\\n");
                case '\r' -> line.append("\\r");
                case '\t' -> line.append("\\t");
                default -> {
                    if (c < ' ') {
                        line.append(String.format("\\u%04x", (int) c));
                    } else {
                        line.append(c);
                    }
                }
            }
        }
        line.append('"');
    }
}
