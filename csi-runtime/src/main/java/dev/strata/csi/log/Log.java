package dev.strata.csi.log;

import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Instant;

/**
 * Structured log lines, one line per event: logfmt ({@code key=value}, values quoted when
 * needed), so that {@code kubectl logs} stays readable and log pipelines can parse it, or one
 * JSON object per line ({@code --log-format=json}) with {@code time}, {@code level}, {@code msg}
 * and the event's fields. Verbosity follows the sidecars' {@code --v}: 0 shows info, warnings and
 * errors; 5 adds details such as request bodies (with secrets removed) and health checks.
 */
public final class Log {

    /** Verbosity at which {@link #debug} lines appear. */
    public static final int DEBUG_VERBOSITY = 5;

    private final PrintStream out;
    private final int verbosity;
    private final LogFormat format;

    public Log(PrintStream out, int verbosity) {
        this(out, verbosity, LogFormat.TEXT);
    }

    public Log(PrintStream out, int verbosity, LogFormat format) {
        this.out = out;
        this.verbosity = verbosity;
        this.format = format;
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
        field(line, "time", Instant.now().toString(), true);
        field(line, "level", level, false);
        field(line, "msg", msg, false);
        for (int i = 0; i < keyValues.length; i += 2) {
            Object value = keyValues[i + 1];
            if (value != null) {
                field(line, String.valueOf(keyValues[i]), String.valueOf(value), false);
            }
        }
        if (cause != null) {
            StringWriter trace = new StringWriter();
            cause.printStackTrace(new PrintWriter(trace));
            field(line, "stack", trace.toString(), false);
        }
        if (format == LogFormat.JSON) {
            line.append('}');
        }
        // One println of the whole line: lines of concurrent threads never interleave.
        out.println(line);
    }

    private void field(StringBuilder line, String key, String value, boolean first) {
        if (format == LogFormat.JSON) {
            line.append(first ? '{' : ',');
            appendQuoted(line, key);
            line.append(':');
            appendQuoted(line, value);
        } else {
            if (!first) {
                line.append(' ');
            }
            line.append(key).append('=');
            appendValue(line, value);
        }
    }

    /** A quoted string: a JSON string (RFC 8259), and logfmt's quoted value. */
    private static void appendQuoted(StringBuilder line, String value) {
        line.append('"');
        appendEscaped(line, value);
        line.append('"');
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
        appendQuoted(line, value);
    }

    /** Quotes, backslashes and control characters escaped alike for logfmt's quoted values and JSON strings. */
    private static void appendEscaped(StringBuilder line, String value) {
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '"' -> line.append("\\\"");
                case '\\' -> line.append("\\\\");
                case '\n' -> line.append("\\n");
                case '\r' -> line.append("\\r");
                case '\t' -> line.append("\\t");
                default -> {
                    if (c < ' ' || c == 0x2028 || c == 0x2029) {
                        line.append(String.format("\\u%04x", (int) c));
                    } else {
                        line.append(c);
                    }
                }
            }
        }
    }
}
