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

    /** Parses {@code args}; a flag that is not given falls back to its environment variable, then its default. */
    public Parsed parse(String[] args, Map<String, String> env) throws UsageException {
        Map<String, String> given = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String arg = args[i];
            if (!arg.startsWith("-") || arg.equals("-") || arg.equals("--")) {
                throw new UsageException("unexpected argument '" + arg + "'");
            }
            String body = arg.startsWith("--") ? arg.substring(2) : arg.substring(1);
            int eq = body.indexOf('=');
            String name = eq < 0 ? body : body.substring(0, eq);
            if (name.equals("help") || name.equals("h")) {
                return new Help();
            }
            if (name.equals("version")) {
                return new Version();
            }
            if (!flags.containsKey(name)) {
                throw new UsageException("unknown flag --" + name);
            }
            String value;
            if (eq >= 0) {
                value = body.substring(eq + 1);
            } else if (i + 1 < args.length) {
                value = args[++i];
            } else {
                throw new UsageException("flag --" + name + " needs a value");
            }
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
            return switch (get(flag)) {
                case "true" -> true;
                case "false" -> false;
                default -> throw new UsageException("flag --" + flag.name() + " takes true or false, got '" + get(flag) + "'");
            };
        }

        /** A duration written as a number with a unit: 500ms, 30s, 5m, 1h. */
        public java.time.Duration durationValue(Flag flag) throws UsageException {
            String raw = get(flag);
            var match = java.util.regex.Pattern.compile("(\\d{1,9})(ms|s|m|h)").matcher(raw);
            if (!match.matches()) {
                throw new UsageException("flag --" + flag.name() + " takes a duration such as 30s or 500ms, got '" + raw + "'");
            }
            long amount = Long.parseLong(match.group(1));
            return switch (match.group(2)) {
                case "ms" -> java.time.Duration.ofMillis(amount);
                case "s" -> java.time.Duration.ofSeconds(amount);
                case "m" -> java.time.Duration.ofMinutes(amount);
                default -> java.time.Duration.ofHours(amount);
            };
        }
    }
}
