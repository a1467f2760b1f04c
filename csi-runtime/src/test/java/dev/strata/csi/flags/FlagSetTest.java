package dev.strata.csi.flags;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class FlagSetTest {

    private static final Flag NODE = new Flag("node-id", "NODE_ID", null, "node");
    private static final Flag GRACE = new Flag("grace", null, "30s", "grace");
    private final FlagSet flags = new FlagSet("prog", "test", List.of(NODE, GRACE));

    private FlagSet.Values run(Map<String, String> env, String... args) throws UsageException {
        return assertInstanceOf(FlagSet.Run.class, flags.parse(args, env)).values();
    }

    @Test
    void acceptsBothSpellingsOfAValue() throws UsageException {
        assertEquals("a", run(Map.of(), "--node-id=a").get(NODE));
        assertEquals("b", run(Map.of(), "--node-id", "b").get(NODE));
        assertEquals("c", run(Map.of(), "-node-id=c").get(NODE));
        assertEquals("x=y", run(Map.of(), "--node-id=x=y").get(NODE));
    }

    @Test
    void flagBeatsEnvironmentBeatsDefault() throws UsageException {
        assertEquals("flag", run(Map.of("NODE_ID", "env"), "--node-id=flag").get(NODE));
        assertEquals("env", run(Map.of("NODE_ID", "env")).get(NODE));
        assertEquals("30s", run(Map.of("NODE_ID", "n")).get(GRACE));
    }

    @Test
    void requiredFlagNamesItsEnvironmentVariable() {
        UsageException e = assertThrows(UsageException.class, () -> run(Map.of()));
        assertEquals("flag --node-id is required (or set NODE_ID)", e.getMessage());
        assertThrows(UsageException.class, () -> run(Map.of("NODE_ID", "")), "an empty variable counts as unset");
    }

    @Test
    void flagGivenTwiceIsAnError() {
        UsageException e = assertThrows(UsageException.class, () -> run(Map.of(), "--node-id=a", "--node-id=b"));
        assertEquals("flag --node-id given twice", e.getMessage());
    }

    @Test
    void helpAndVersionWinOverEverythingElse() throws UsageException {
        assertInstanceOf(FlagSet.Help.class, flags.parse(new String[] {"--node-id=a", "--help"}, Map.of()));
        assertInstanceOf(FlagSet.Help.class, flags.parse(new String[] {"-h"}, Map.of()));
        assertInstanceOf(FlagSet.Version.class, flags.parse(new String[] {"--version"}, Map.of()));
    }

    @Test
    void durations() throws UsageException {
        assertEquals(Duration.ofMillis(250), run(Map.of("NODE_ID", "n"), "--grace=250ms").durationValue(GRACE));
        assertEquals(Duration.ofMinutes(2), run(Map.of("NODE_ID", "n"), "--grace=2m").durationValue(GRACE));
        assertThrows(UsageException.class, () -> run(Map.of("NODE_ID", "n"), "--grace=-1s").durationValue(GRACE));
        assertThrows(UsageException.class, () -> run(Map.of("NODE_ID", "n"), "--grace=1d").durationValue(GRACE));
    }

    @Test
    void usageShowsEnvironmentAndDefaults() {
        String usage = flags.usage();
        assertEquals(true, usage.contains("env NODE_ID; required"), usage);
        assertEquals(true, usage.contains("default \"30s\""), usage);
    }
}
