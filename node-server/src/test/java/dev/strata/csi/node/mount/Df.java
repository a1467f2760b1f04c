package dev.strata.csi.node.mount;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.strata.csi.system.Command;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/** df(1), the reference FilesystemStats is checked against. */
public final class Df {

    /** A filesystem tidies up after itself for a moment after writes (xfs frees preallocations). */
    private static final int ATTEMPTS = 10;

    private Df() {}

    /** Asserts that {@code stats} says what {@code df} says about {@code path}, and returns what they agree on. */
    public static FilesystemUsage assertAgrees(FilesystemStats stats, Path path) throws Exception {
        Command command = new Command();
        FilesystemUsage usage = null;
        List<Long> df = null;
        for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
            command.run(Duration.ofSeconds(30), "sync", "-f", path.toString()).check("sync -f " + path);
            usage = stats.usage(path);
            String out = command.run(Duration.ofSeconds(30), "df", "--output=size,avail,itotal,iavail", "-B1", path.toString())
                    .check("df " + path).stdout();
            df = Arrays.stream(out.lines().skip(1).findFirst().orElseThrow().strip().split("\\s+")).map(Long::parseLong).toList();
            if (df.equals(numbers(usage))) {
                return usage;
            }
            Thread.sleep(100);
        }
        assertEquals(df, numbers(usage), "df size, avail, itotal, iavail of " + path + " against " + usage);
        return usage;
    }

    private static List<Long> numbers(FilesystemUsage usage) {
        return List.of(usage.totalBytes(), usage.availableBytes(), usage.totalInodes(), usage.freeInodes());
    }
}
