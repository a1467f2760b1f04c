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
}
