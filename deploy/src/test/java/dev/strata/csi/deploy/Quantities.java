package dev.strata.csi.deploy;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** Kubernetes resource quantities, as the manifests write them. */
final class Quantities {

    private static final Pattern BYTES = Pattern.compile("([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T|)");

    private Quantities() {}

    /** A quantity of bytes (320Mi, 1G, 1000); -1 when {@code quantity} is null or not one. */
    static long bytes(String quantity) {
        Matcher matcher = BYTES.matcher(quantity == null ? "" : quantity);
        if (!matcher.matches()) {
            return -1;
        }
        long factor = switch (matcher.group(2)) {
            case "Ki" -> 1L << 10;
            case "Mi" -> 1L << 20;
            case "Gi" -> 1L << 30;
            case "Ti" -> 1L << 40;
            case "k" -> 1_000L;
            case "M" -> 1_000_000L;
            case "G" -> 1_000_000_000L;
            case "T" -> 1_000_000_000_000L;
            default -> 1L;
        };
        return Long.parseLong(matcher.group(1)) * factor;
    }
}
