package dev.strata.csi.flags;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The flags a program accepts, their parsing, and the --help text that documents them. */
public final class FlagSet {

    /** What a command line asked for. */
    public sealed interface Parsed permits Run, Help, Version {}

    /** Start the program with these flag values. */
    public record Run(Values values) implements Parsed {}

    /** Print the usage and exit 0. */
    public record Help() implements Parsed {}

    /** Print the version and exit 0. */
    public record Version() implements Parsed {}

    private final String program;
    private final String summary;
    private final Map<String, Flag> flags = new LinkedHashMap<>();

    public FlagSet(String program, String summary, List<Flag> flags) {
        this.program = program;
        this.summary = summary;
        for (Flag flag : flags) {
            if (this.flags.put(flag.name(), flag) != null) {
                throw new IllegalArgumentException("flag declared twice: " + flag.name());
            }
        }
    }

    public String program() {
        return program;
    }

    /**
     * Parses {@code args} as Go's flag package does: {@code -name=value}, {@code -name value}, with one
     * dash or two; a boolean flag alone means true (a following {@code true} or {@code false} is
     * taken as its value, since no positional argument exists); {@code --} ends the flags. Unlike
     * Go, a repeated flag is an error. A flag that is not given falls back to its environment
     * variable, then its default.
     */
    public Parsed parse(String[] args, Map<String, String> env) throws UsageException {
        Map<String, String> given = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (arg.equals("--")) {
                if (i + 1 < args.length) {
                    throw new UsageException("unexpected argument '" + args[i + 1] + "'");
                }
                break;
            }
            if (!arg.startsWith("-") || arg.equals("-")) {
                String previous = i > 0 ? args[i - 1] : "";
                Flag previousFlag = flagNamed(previous);
                String hint = previousFlag != null && previousFlag.isBool()
                        ? " (a boolean flag takes its value as " + previous + "=true or " + previous + "=false)" : "";
                throw new UsageException("unexpected argument '" + arg + "'" + hint);
            }
            String body = arg.startsWith("--") ? arg.substring(2) : arg.substring(1);
            if (body.isEmpty() || body.startsWith("-") || body.startsWith("=")) {
                throw new UsageException("bad flag syntax: " + arg);
            }
            int eq = body.indexOf('=');
            String name = eq < 0 ? body : body.substring(0, eq);
            if (name.equals("help") || name.equals("h")) {
                return new Help();
            }
            if (name.equals("version")) {
                return new Version();
            }
            Flag flag = flags.get(name);
            if (flag == null) {
                throw new UsageException("unknown flag --" + name);
            }
            String value;
            if (eq >= 0) {
                value = body.substring(eq + 1);
            } else if (flag.isBool()) {
                // Go reads "--flag true" as the flag plus a positional argument; our programs take no
                // positional arguments, so a following true/false can only be meant as the value.
                boolean spelledOut = i + 1 < args.length && (args[i + 1].equals("true") || args[i + 1].equals("false"));
                value = spelledOut ? args[++i] : "true";
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                throw new UsageException("flag --" + name + " needs a value");
            }
            if (flag.isBool() && parseBool(value) == null) {
                throw new UsageException("flag --" + name + " takes true or false, got '" + value + "'");
            }
            // Stricter than Go (where the last one wins): a manifest patch that repeats a flag is a mistake to show.
            if (given.put(name, value) != null) {
                throw new UsageException("flag --" + name + " given twice");
            }
        }
        Map<String, String> values = new HashMap<>();
        for (Flag flag : flags.values()) {
            String value = given.get(flag.name());
            if (value == null && flag.env() != null) {
                value = env.get(flag.env());
            }
            if (value == null || value.isEmpty()) {
                value = flag.defaultValue();
            }
            if (value == null) {
                throw new UsageException("flag --" + flag.name() + " is required"
                        + (flag.env() == null ? "" : " (or set " + flag.env() + ")"));
            }
            values.put(flag.name(), value);
        }
        return new Run(new Values(values));
    }

    /** The flag {@code arg} names (with its dashes, no value), or null. */
    private Flag flagNamed(String arg) {
        String name = arg.startsWith("--") ? arg.substring(2) : arg.startsWith("-") ? arg.substring(1) : null;
        return name == null ? null : flags.get(name);
    }

    /** A boolean as Go's strconv.ParseBool reads it, or null. */
    static Boolean parseBool(String text) {
        return switch (text) {
            case "1", "t", "T", "TRUE", "true", "True" -> true;
            case "0", "f", "F", "FALSE", "false", "False" -> false;
            default -> null;
        };
    }

    /** The --help text: every flag with its environment variable and default. */
    public String usage() {
        StringBuilder out = new StringBuilder();
        out.append("Usage: ").append(program).append(" [flags]\n\n").append(summary).append("\n\nFlags:\n");
        for (Flag flag : flags.values()) {
            out.append("  --").append(flag.name()).append('\n');
            out.append("        ").append(flag.help()).append('\n');
            out.append("        ");
            out.append(flag.env() == null ? "" : "env " + flag.env() + "; ");
            out.append(flag.required() ? "required" : "default \"" + flag.defaultValue() + "\"").append('\n');
        }
        out.append("  --help     print this text\n");
        out.append("  --version  print the version\n");
        return out.toString();
    }

    /** Flag values after parsing; every declared flag has one. */
    public static final class Values {
        private final Map<String, String> values;

        Values(Map<String, String> values) {
            this.values = Map.copyOf(values);
        }

        public String get(Flag flag) {
            String value = values.get(flag.name());
            if (value == null) {
                throw new IllegalArgumentException("flag not declared: " + flag.name());
            }
            return value;
        }

        public int intValue(Flag flag, int min, int max) throws UsageException {
            String raw = get(flag);
            try {
                int value = Integer.parseInt(raw);
                if (value < min || value > max) {
                    throw new UsageException("flag --" + flag.name() + " must be between " + min + " and " + max + ", got " + raw);
                }
                return value;
            } catch (NumberFormatException e) {
                throw new UsageException("flag --" + flag.name() + " takes a whole number, got '" + raw + "'");
            }
        }

        public boolean booleanValue(Flag flag) throws UsageException {
            Boolean value = parseBool(get(flag));
            if (value == null) {
                throw new UsageException("flag --" + flag.name() + " takes true or false, got '" + get(flag) + "'");
            }
            return value;
        }

        /** A duration as Go writes it (1m30s, 500ms, 2h, 1.5h); never negative. */
        public java.time.Duration durationValue(Flag flag) throws UsageException {
            String raw = get(flag);
            java.time.Duration value = GoDuration.parse(raw);
            if (value == null) {
                throw new UsageException("flag --" + flag.name() + " takes a duration such as 1m30s, 30s or 500ms, got '" + raw + "'");
            }
            if (value.isNegative()) {
                throw new UsageException("flag --" + flag.name() + " must not be negative, got '" + raw + "'");
            }
            return value;
        }
    }
}
