package dev.strata.csi.log;

import dev.strata.csi.flags.UsageException;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** How log lines are written: logfmt for people ({@code text}), one JSON object per line for log pipelines ({@code json}). */
public enum LogFormat {
    TEXT,
    JSON;

    public static LogFormat parse(String value) throws UsageException {
        return switch (value.toLowerCase(Locale.ROOT)) {
            case "text" -> TEXT;
            case "json" -> JSON;
            default -> throw new UsageException("flag --log-format takes text or json, got '" + value + "'");
        };
    }

    /**
     * The format asked for, found before the flags are parsed, so that a bad command line is
     * reported in it too: {@code --log-format json} (one dash or two, {@code =} or a space) or
     * {@code LOG_FORMAT=json}. The flag parser still validates the flag itself.
     */
    public static LogFormat requested(List<String> args, Map<String, String> env) {
        String value = env.getOrDefault("LOG_FORMAT", "text");
        for (int i = 0; i < args.size(); i++) {
            String arg = args.get(i).replaceFirst("^--?", "");
            if (arg.equals("log-format") && i + 1 < args.size()) {
                value = args.get(i + 1);
            } else if (arg.startsWith("log-format=")) {
                value = arg.substring("log-format=".length());
            }
        }
        return value.equalsIgnoreCase("json") ? JSON : TEXT;
    }
}
