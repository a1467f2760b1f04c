package dev.strata.csi.flags;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A duration written as Go's time.ParseDuration reads it, so a flag takes what the sidecars'
 * flags take: a sequence of decimal numbers with units, such as {@code 1m30s}, {@code 500ms},
 * {@code 1.5h}, {@code 2h45m}; units ns, us (µs), ms, s, m, h; a lone {@code 0} needs no unit.
 */
final class GoDuration {

    private static final Pattern PART = Pattern.compile("(\\d+\\.?\\d*|\\.\\d+)(ns|us|µs|μs|ms|s|m|h)");
    private static final Map<String, Long> NANOS = Map.of(
            "ns", 1L, "us", 1_000L, "µs", 1_000L, "μs", 1_000L, "ms", 1_000_000L,
            "s", 1_000_000_000L, "m", 60_000_000_000L, "h", 3_600_000_000_000L);

    private GoDuration() {}

    /** The duration {@code text} names, or null when it is not Go's duration syntax. */
    static Duration parse(String text) {
        String body = text.startsWith("-") || text.startsWith("+") ? text.substring(1) : text;
        boolean negative = text.startsWith("-");
        if (body.equals("0")) {
            return Duration.ZERO;
        }
        if (body.isEmpty()) {
            return null;
        }
        Matcher part = PART.matcher(body);
        BigDecimal nanos = BigDecimal.ZERO;
        int at = 0;
        while (at < body.length()) {
            if (!part.find(at) || part.start() != at) {
                return null;
            }
            nanos = nanos.add(new BigDecimal(part.group(1)).multiply(BigDecimal.valueOf(NANOS.get(part.group(2)))));
            at = part.end();
        }
        // Go's limit: a duration is an int64 of nanoseconds (about 290 years).
        if (nanos.compareTo(BigDecimal.valueOf(Long.MAX_VALUE)) > 0) {
            return null;
        }
        Duration duration = Duration.ofNanos(nanos.longValue());
        return negative ? duration.negated() : duration;
    }
}
