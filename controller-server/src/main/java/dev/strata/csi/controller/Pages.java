package dev.strata.csi.controller;

import dev.strata.csi.rpc.CsiException;
import java.util.List;
import java.util.function.Function;

/**
 * The pages of ListVolumes and ListSnapshots: every entry in id order. The page token is
 * {@code next=<id>}, the id of the next entry to list, so an entry deleted between two pages
 * shifts nothing: the next page starts at the first id at or after it.
 */
final class Pages {

    private static final String TOKEN_PREFIX = "next=";

    private Pages() {}

    /** One page: its entries, and the token of the next page (empty after the last). */
    record Page<T>(List<T> entries, String nextToken) {}

    /** INVALID_ARGUMENT or ABORTED for a request no page can answer; before any listing is done. */
    static void checkToken(int maxEntries, String startingToken) {
        if (maxEntries < 0) {
            throw CsiException.invalidArgument("max_entries must not be negative");
        }
        if (!startingToken.isEmpty() && (!startingToken.startsWith(TOKEN_PREFIX) || startingToken.length() == TOKEN_PREFIX.length())) {
            throw CsiException.aborted("starting_token '" + CsiException.printable(startingToken) + "' was not issued by this driver");
        }
    }

    /** Entries in id order from an id on, at most a number of them. */
    @FunctionalInterface
    interface Source<T> {
        List<T> from(String fromId, int limit) throws Exception;
    }

    /**
     * The page that {@code maxEntries} (0: no limit) and {@code startingToken} ask for, read from
     * {@code source} (one entry more than the page, to name the next); call {@link #checkToken} first.
     */
    static <T> Page<T> page(int maxEntries, String startingToken, Source<T> source, Function<T, String> id) throws Exception {
        String from = startingToken.isEmpty() ? "" : startingToken.substring(TOKEN_PREFIX.length());
        // One more than the page, to name the next; max_entries may be Integer.MAX_VALUE itself.
        List<T> entries = source.from(from, maxEntries == 0 ? Integer.MAX_VALUE : (int) Math.min(maxEntries + 1L, Integer.MAX_VALUE));
        if (maxEntries == 0 || entries.size() <= maxEntries) {
            return new Page<>(entries, "");
        }
        return new Page<>(entries.subList(0, maxEntries), TOKEN_PREFIX + id.apply(entries.get(maxEntries)));
    }
}
