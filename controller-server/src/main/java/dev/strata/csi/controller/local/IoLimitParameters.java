package dev.strata.csi.controller.local;

import dev.strata.csi.agent.api.IoLimits;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.rpc.CsiException;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The IO limits among a local volume's mutable parameters: a VolumeAttributesClass's parameters,
 * which external-provisioner passes to CreateVolume and external-resizer to
 * ControllerModifyVolume. Each key is optional; a key the request leaves out keeps its limit.
 *
 * <ul>
 *   <li>{@code readIOPS}, {@code writeIOPS}: operations per second, a positive whole number;</li>
 *   <li>{@code readBytesPerSecond}, {@code writeBytesPerSecond}: a positive whole number of bytes,
 *       or with a suffix as in a Kubernetes quantity: {@code k M G T} (powers of 1000) or
 *       {@code Ki Mi Gi Ti} (powers of 1024), e.g. {@code 50Mi};</li>
 *   <li>{@code max} for any of them: no limit.</li>
 * </ul>
 *
 * Kubernetes' own keys (external-resizer's --extra-modify-metadata) are ignored; any other key
 * ({@link LocalParameters#ATTRIBUTES_CLASS}), or a value that is none of these, is
 * INVALID_ARGUMENT, which Kubernetes reports as infeasible on the claim.
 */
final class IoLimitParameters {

    static final String READ_IOPS = LocalParameters.READ_IOPS;
    static final String WRITE_IOPS = LocalParameters.WRITE_IOPS;
    static final String READ_BYTES_PER_SECOND = LocalParameters.READ_BYTES_PER_SECOND;
    static final String WRITE_BYTES_PER_SECOND = LocalParameters.WRITE_BYTES_PER_SECOND;

    /** "max": no limit, as cgroup v2's io.max spells it. */
    static final String NO_LIMIT = "max";

    private static final Pattern QUANTITY = Pattern.compile("([1-9][0-9]{0,18})(|k|M|G|T|Ki|Mi|Gi|Ti)");

    private IoLimitParameters() {}

    /** The limits the parameters set (0 for "max": the limit is removed), as the node agent takes them. */
    static IoLimits parse(Map<String, String> parameters) {
        LocalParameters.ATTRIBUTES_CLASS.require(parameters);
        IoLimits.Builder limits = IoLimits.newBuilder();
        for (Map.Entry<String, String> parameter : parameters.entrySet()) {
            String key = parameter.getKey();
            switch (key) {
                case READ_IOPS -> limits.setReadIops(value(key, parameter.getValue(), false));
                case WRITE_IOPS -> limits.setWriteIops(value(key, parameter.getValue(), false));
                case READ_BYTES_PER_SECOND -> limits.setReadBytesPerSecond(value(key, parameter.getValue(), true));
                case WRITE_BYTES_PER_SECOND -> limits.setWriteBytesPerSecond(value(key, parameter.getValue(), true));
                default -> { } // Kubernetes' own: require() let it through
            }
        }
        return limits.build();
    }

    /** Whether {@code limits} names any limit at all, to set or to remove. */
    static boolean any(IoLimits limits) {
        return limits.hasReadIops() || limits.hasWriteIops() || limits.hasReadBytesPerSecond() || limits.hasWriteBytesPerSecond();
    }

    private static long value(String key, String value, boolean bytes) {
        if (value.equals(NO_LIMIT)) {
            return 0;
        }
        Matcher quantity = QUANTITY.matcher(value);
        if (!quantity.matches() || (!bytes && !quantity.group(2).isEmpty())) {
            throw CsiException.invalidArgument("mutable parameter " + key + " must be a positive whole number"
                    + (bytes ? " of bytes, with an optional suffix k, M, G, T, Ki, Mi, Gi or Ti," : "") + " or '" + NO_LIMIT
                    + "', got '" + CsiException.printable(value) + "'");
        }
        long multiplier = switch (quantity.group(2)) {
            case "k" -> 1_000L;
            case "M" -> 1_000_000L;
            case "G" -> 1_000_000_000L;
            case "T" -> 1_000_000_000_000L;
            case "Ki" -> 1L << 10;
            case "Mi" -> 1L << 20;
            case "Gi" -> 1L << 30;
            case "Ti" -> 1L << 40;
            default -> 1L;
        };
        try {
            return Math.multiplyExact(Long.parseLong(quantity.group(1)), multiplier);
        } catch (ArithmeticException | NumberFormatException e) {
            throw CsiException.invalidArgument("mutable parameter " + key + " is too large: '" + CsiException.printable(value) + "'");
        }
    }
}
