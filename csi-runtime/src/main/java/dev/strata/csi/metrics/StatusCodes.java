package dev.strata.csi.metrics;

import io.grpc.Status;

/** gRPC status codes named as Go's codes.Code.String() names them, which the CSI sidecars' metrics use. */
public final class StatusCodes {

    private StatusCodes() {}

    /** {@code INVALID_ARGUMENT} as {@code InvalidArgument}; {@code OK} stays; {@code CANCELLED} as Go spells it, {@code Canceled}. */
    public static String goName(Status.Code code) {
        if (code == Status.Code.OK) {
            return "OK";
        }
        if (code == Status.Code.CANCELLED) {
            return "Canceled";
        }
        StringBuilder name = new StringBuilder();
        for (String word : code.name().split("_")) {
            name.append(word.charAt(0)).append(word.substring(1).toLowerCase(java.util.Locale.ROOT));
        }
        return name.toString();
    }
}
