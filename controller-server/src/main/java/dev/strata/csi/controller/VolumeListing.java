package dev.strata.csi.controller;

import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.ListVolumesResponse;
import dev.strata.csi.rpc.CsiException;
import java.util.Comparator;
import java.util.List;

/**
 * ListVolumes' pages: every backend's volumes in volume id order. The page token is
 * {@code next=<id>}, the id of the next volume to list, so a volume deleted between two pages
 * shifts nothing: the next page starts at the first id at or after it.
 */
final class VolumeListing {

    private static final String TOKEN_PREFIX = "next=";

    private VolumeListing() {}

    /** INVALID_ARGUMENT or ABORTED for a request no page can answer. */
    static void checkToken(ListVolumesRequest request) {
        if (request.getMaxEntries() < 0) {
            throw CsiException.invalidArgument("max_entries must not be negative");
        }
        String token = request.getStartingToken();
        if (!token.isEmpty() && (!token.startsWith(TOKEN_PREFIX) || token.length() == TOKEN_PREFIX.length())) {
            throw CsiException.aborted("starting_token '" + CsiException.printable(token) + "' was not issued by this driver");
        }
    }

    /** The page of {@code all} the request asks for; call {@link #checkToken} first. */
    static ListVolumesResponse page(ListVolumesRequest request, List<ListVolumesResponse.Entry> all) {
        String from = request.getStartingToken().isEmpty() ? "" : request.getStartingToken().substring(TOKEN_PREFIX.length());
        List<ListVolumesResponse.Entry> entries = all.stream()
                .filter(entry -> entry.getVolume().getVolumeId().compareTo(from) >= 0)
                .sorted(Comparator.comparing(entry -> entry.getVolume().getVolumeId()))
                .toList();
        int limit = request.getMaxEntries() == 0 ? entries.size() : Math.min(request.getMaxEntries(), entries.size());
        ListVolumesResponse.Builder reply = ListVolumesResponse.newBuilder().addAllEntries(entries.subList(0, limit));
        if (limit < entries.size()) {
            reply.setNextToken(TOKEN_PREFIX + entries.get(limit).getVolume().getVolumeId());
        }
        return reply.build();
    }
}
