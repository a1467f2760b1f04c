package dev.strata.csi.controller;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** Paging of ListVolumes over an ordered source, as the index answers it. */
class PagesTest {

    private static final List<String> IDS = List.of("local/a/pvc-1", "local/a/pvc-2", "local/b/pvc-3");

    private static Pages.Page<String> page(int maxEntries, String token) throws Exception {
        return Pages.page(maxEntries, token, (from, limit) -> IDS.stream().filter(id -> id.compareTo(from) >= 0).limit(limit).toList(),
                Function.identity());
    }

    @Test
    void theLargestMaxEntriesIsOnePageOfEverything() throws Exception {
        // max_entries is an int32: the page's one extra entry must not overflow it (the hostile suite sent this).
        assertEquals(new Pages.Page<>(IDS, ""), page(Integer.MAX_VALUE, ""));
        assertEquals(new Pages.Page<>(IDS, ""), page(0, ""));
    }

    @Test
    void eachPageNamesTheNextUntilTheLast() throws Exception {
        Pages.Page<String> first = page(2, "");
        assertEquals(IDS.subList(0, 2), first.entries());
        Pages.Page<String> second = page(2, first.nextToken());
        assertEquals(new Pages.Page<>(IDS.subList(2, 3), ""), second);
    }
}
