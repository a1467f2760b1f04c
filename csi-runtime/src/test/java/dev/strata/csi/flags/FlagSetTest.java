package dev.strata.csi.flags;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class FlagSetTest {

    private static final Flag NODE = Flag.of("node-id", null, "node");
    private static final Flag GRACE = new Flag("grace", null, "30s", "grace");
    private static final Flag PLAIN = Flag.bool("plain", false, "plain");
    private static final Flag MOUNT = new Flag("mount", null, "true", "mount", true); // no environment variable
    private final FlagSet flags = new FlagSet("prog", "test", List.of(NODE, GRACE, PLAIN, MOUNT));

    private FlagSet.Values run(Map<String, String> env, String... args) throws UsageException {
        return assertInstanceOf(FlagSet.Run.class, flags.parse(args, env)).values();
    }

    private FlagSet.Values run(String... args) throws UsageException {
        return run(Map.of("NODE_ID", "n"), args);
    }

    private String refused(String... args) {
        return assertThrows(UsageException.class, () -> run(args)).getMessage();
    }

    @Test
    void acceptsEveryGoSpellingOfAValue() throws UsageException {
        assertEquals("a", run(Map.of(), "--node-id=a").get(NODE));
        assertEquals("b", run(Map.of(), "--node-id", "b").get(NODE));
        assertEquals("c", run(Map.of(), "-node-id=c").get(NODE));
        assertEquals("d", run(Map.of(), "-node-id", "d").get(NODE));
        assertEquals("x=y", run(Map.of(), "--node-id=x=y").get(NODE));
        assertEquals("30s", run("--grace=").get(GRACE), "an empty value counts as not given, as an empty variable does");
        assertEquals("-dash", run("--node-id", "-dash").get(NODE), "the next argument is the value, even with a dash");
    }

    @Test
    void booleanFlagAloneMeansTrue() throws UsageException {
        assertFalse(run().booleanValue(PLAIN));
        assertTrue(run("--plain").booleanValue(PLAIN));
        assertTrue(run("-plain").booleanValue(PLAIN));
        assertTrue(run("--plain", "--node-id", "x").booleanValue(PLAIN), "a boolean flag never takes the next flag");
        assertEquals("x", run("--plain", "--node-id", "x").get(NODE));
        assertFalse(run("--mount=false").booleanValue(MOUNT));
        assertTrue(run("--mount").booleanValue(MOUNT));
    }

    @Test
    void booleanValuesAsGoReadsThem() throws UsageException {
        for (String yes : List.of("1", "t", "T", "TRUE", "true", "True")) {
            assertTrue(run("--plain=" + yes).booleanValue(PLAIN), yes);
        }
        for (String no : List.of("0", "f", "F", "FALSE", "false", "False")) {
            assertFalse(run("--plain=" + no).booleanValue(PLAIN), no);
        }
        assertTrue(run(Map.of("NODE_ID", "n", "PLAIN", "1")).booleanValue(PLAIN), "the environment too");
        assertEquals("flag --plain takes true or false, got 'yes'", refused("--plain=yes"));
    }

    @Test
    void booleanFollowedByTrueOrFalseTakesIt() throws UsageException {
        // No positional arguments exist, so this older spelling cannot mean anything else.
        assertTrue(run("--plain", "true").booleanValue(PLAIN));
        assertFalse(run("--mount", "false").booleanValue(MOUNT));
        assertEquals("unexpected argument 'yes' (a boolean flag takes its value as --plain=true or --plain=false)",
                refused("--plain", "yes"));
    }

    @Test
    void badSyntaxAndStrayArguments() {
        assertEquals("bad flag syntax: ---plain", refused("---plain"));
        assertEquals("bad flag syntax: -=x", refused("-=x"));
        assertEquals("unexpected argument 'stray'", refused("stray"));
        assertEquals("unexpected argument '-'", refused("-"));
        assertEquals("unknown flag --nope", refused("--nope"));
        assertEquals("flag --grace needs a value", refused("--grace"));
        assertEquals("unexpected argument 'x'", refused("--", "x"));
    }

    @Test
    void doubleDashEndsTheFlags() throws UsageException {
        assertTrue(run("--plain", "--").booleanValue(PLAIN));
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
        assertEquals("flag --node-id given twice", refused("--node-id=a", "--node-id=b"));
        assertEquals("flag --plain given twice", refused("--plain", "-plain=false"));
    }

    @Test
    void helpAndVersionWinOverEverythingElse() throws UsageException {
        assertInstanceOf(FlagSet.Help.class, flags.parse(new String[] {"--node-id=a", "--help"}, Map.of()));
        assertInstanceOf(FlagSet.Help.class, flags.parse(new String[] {"-h"}, Map.of()));
        assertInstanceOf(FlagSet.Help.class, flags.parse(new String[] {"-help"}, Map.of()));
        assertInstanceOf(FlagSet.Version.class, flags.parse(new String[] {"--version"}, Map.of()));
        assertInstanceOf(FlagSet.Version.class, flags.parse(new String[] {"-version"}, Map.of()));
    }

    private Duration duration(String text) throws UsageException {
        return run("--grace=" + text).durationValue(GRACE);
    }

    @Test
    void durationsAsGoWritesThem() throws UsageException {
        assertEquals(Duration.ofMillis(500), duration("500ms"));
        assertEquals(Duration.ofSeconds(90), duration("1m30s"));
        assertEquals(Duration.ofHours(2), duration("2h"));
        assertEquals(Duration.ofMinutes(90), duration("1.5h"));
        assertEquals(Duration.ofMinutes(165), duration("2h45m"));
        assertEquals(Duration.ofMillis(1500), duration("1s500ms"));
        assertEquals(Duration.ofMillis(300), duration(".3s"));
        assertEquals(Duration.ofNanos(1_500), duration("1us500ns"));
        assertEquals(Duration.ofNanos(2_000), duration("2µs"));
        assertEquals(Duration.ZERO, duration("0"));
        assertEquals(Duration.ZERO, duration("0s"));
        assertEquals(Duration.ofSeconds(30), duration("+30s"));
        assertEquals(Duration.ofMillis(1250), run("--grace", "1.25s").durationValue(GRACE), "the spaced form too");
    }

    @Test
    void badDurationsAreRefused() {
        for (String bad : List.of("30", "1d", "s", "1m30", "1..5s", "1 s", "1S", "--1s", "9999999999h")) {
            UsageException e = assertThrows(UsageException.class, () -> duration(bad), bad);
            assertEquals("flag --grace takes a duration such as 1m30s, 30s or 500ms, got '" + bad + "'", e.getMessage());
        }
        UsageException negative = assertThrows(UsageException.class, () -> duration("-1s"));
        assertEquals("flag --grace must not be negative, got '-1s'", negative.getMessage());
    }

    @Test
    void usageShowsEnvironmentAndDefaults() {
        String usage = flags.usage();
        assertTrue(usage.contains("env NODE_ID; required"), usage);
        assertTrue(usage.contains("default \"30s\""), usage);
        assertTrue(usage.contains("  --plain\n"), usage);
    }
}
