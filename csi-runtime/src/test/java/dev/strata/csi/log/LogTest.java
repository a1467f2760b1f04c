package dev.strata.csi.log;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class LogTest {

    private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();

    private String line(int verbosity, java.util.function.Consumer<Log> write) {
        write.accept(new Log(new PrintStream(buffer, true, StandardCharsets.UTF_8), verbosity));
        return buffer.toString(StandardCharsets.UTF_8);
    }

    @Test
    void valuesWithSpacesQuotesOrNewlinesStayOnOneParseableLine() {
        String out = line(0, log -> log.info("call done", "path", "/a b", "error", "say \"no\"\nnext", "code", "OK"));
        assertEquals(1, out.lines().count(), out);
        assertTrue(out.contains(" msg=\"call done\" path=\"/a b\" error=\"say \\\"no\\\"\\nnext\" code=OK"), out);
    }

    @Test
    void nullFieldsAreLeftOut() {
        String out = line(0, log -> log.warn("x", "volume_id", null, "code", "NOT_FOUND"));
        assertTrue(out.contains("level=WARN msg=x code=NOT_FOUND"), out);
    }

    @Test
    void debugOnlyAtHighVerbosity() {
        assertEquals("", line(0, log -> log.debug("hidden")));
        assertTrue(line(5, log -> log.debug("shown")).contains("level=DEBUG msg=shown"));
    }

    @Test
    void jsonLinesAreOneObjectEachWithEveryCharacterEscaped() {
        write(new Log(new PrintStream(buffer, true, StandardCharsets.UTF_8), 0, LogFormat.JSON),
                log -> log.warn("call", "error", "say \"no\"\nnext\tc:\\ \u0001", "code", "NOT_FOUND", "none", null));
        String out = buffer.toString(StandardCharsets.UTF_8);
        assertEquals(1, out.lines().count(), out);
        assertTrue(out.matches("\\{\"time\":\"[0-9T:.Z-]+\",\"level\":\"WARN\",\"msg\":\"call\","
                + "\"error\":\"say \\\\\"no\\\\\"\\\\nnext\\\\tc:\\\\\\\\ \\\\u0001\",\"code\":\"NOT_FOUND\"}\\n"), out);
    }

    @Test
    void theFormatAskedForIsFoundBeforeTheFlagsAreParsed() throws Exception {
        assertEquals(LogFormat.JSON, LogFormat.requested(java.util.List.of("--log-format", "json", "--bad"), java.util.Map.of()));
        assertEquals(LogFormat.JSON, LogFormat.requested(java.util.List.of("-log-format=json"), java.util.Map.of()));
        assertEquals(LogFormat.JSON, LogFormat.requested(java.util.List.of(), java.util.Map.of("LOG_FORMAT", "json")));
        assertEquals(LogFormat.TEXT, LogFormat.requested(java.util.List.of("--log-format=text"), java.util.Map.of("LOG_FORMAT", "json")));
        assertEquals(LogFormat.TEXT, LogFormat.requested(java.util.List.of(), java.util.Map.of()));
        assertEquals("flag --log-format takes text or json, got 'xml'",
                org.junit.jupiter.api.Assertions.assertThrows(dev.strata.csi.flags.UsageException.class, () -> LogFormat.parse("xml")).getMessage());
    }

    private static void write(Log log, java.util.function.Consumer<Log> body) {
        body.accept(log);
    }
}
