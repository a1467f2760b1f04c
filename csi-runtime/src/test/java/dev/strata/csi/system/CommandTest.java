package dev.strata.csi.system;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CommandTest {

    private static final Duration SHORT = Duration.ofSeconds(10);

    private final Commands commands = new Command();

    @TempDir
    Path dir;

    @Test
    void capturesExitCodeStdoutAndStderrSeparately() throws Exception {
        CommandResult result = commands.run(SHORT, "sh", "-c", "echo out; echo err >&2; exit 3");
        assertEquals(new CommandResult(3, "out\n", "err\n"), result);
        assertFalse(result.succeeded());
    }

    @Test
    void argumentsAreNeverInterpretedByAShell() throws Exception {
        CommandResult result = commands.run(SHORT, "printf", "%s|", "a b", "$(id)", "; rm -rf /", "*");
        assertEquals("a b|$(id)|; rm -rf /|*|", result.stdout());
    }

    @Test
    void inputReachesTheProgramsStdinAsItIsAndOnlyThere() throws Exception {
        CommandResult result = commands.run(SHORT, "pass\nphrase".getBytes(java.nio.charset.StandardCharsets.UTF_8),
                "sh", "-c", "cat; echo \"|$#|\"");
        assertEquals("pass\nphrase|0|\n", result.stdout());
        assertEquals("", commands.run(SHORT, "cat").stdout(), "without input, stdin is empty");
    }

    @Test
    void aProgramThatReadsNoInputStillGivesItsResult() throws Exception {
        assertEquals(new CommandResult(4, "", ""), commands.run(SHORT, new byte[1 << 20], "sh", "-c", "exit 4"));
    }

    @Test
    void checkPassesSuccessThrough() throws Exception {
        CommandResult result = commands.run(SHORT, "true");
        assertSame(result, result.check("true"));
    }

    @Test
    void checkNamesTheCommandTheExitCodeAndStderrOnOneLine() throws Exception {
        CommandResult result = commands.run(SHORT, "sh", "-c", "echo '  first problem' >&2; echo 'second' >&2; exit 32");
        CommandException e = assertThrows(CommandException.class, () -> result.check("mount /dev/x /mnt"));
        assertEquals("mount /dev/x /mnt: exit 32: first problem; second", e.getMessage());
    }

    @Test
    void checkWithoutStderrStillSaysTheExitCode() {
        CommandException e = assertThrows(CommandException.class, () -> new CommandResult(2, "", "\n").check("blkid /dev/x"));
        assertEquals("blkid /dev/x: exit 2", e.getMessage());
    }

    @Test
    void longStderrIsCut() {
        CommandException e = assertThrows(CommandException.class,
                () -> new CommandResult(1, "", "x".repeat(5000)).check("tool"));
        assertTrue(e.getMessage().length() < 600, e.getMessage());
        assertTrue(e.getMessage().endsWith("..."), e.getMessage());
    }

    @Test
    void aProgramThatCannotStartIsAnException() {
        CommandException e = assertThrows(CommandException.class,
                () -> commands.run(SHORT, "/nonexistent/strata-tool", "--help"));
        assertTrue(e.getMessage().startsWith("cannot start /nonexistent/strata-tool: "), e.getMessage());
    }

    @Test
    void inputIsEmptySoPromptsDoNotHang() throws Exception {
        assertEquals("", commands.run(SHORT, "cat").stdout());
    }

    @Test
    void timeoutKillsTheProgramAndWhatItStarted() throws Exception {
        Path childPid = dir.resolve("child.pid");
        long started = System.nanoTime();
        CommandException e = assertThrows(CommandException.class, () -> commands.run(Duration.ofMillis(500),
                "sh", "-c", "sleep 60 & echo $! > " + childPid + "; wait"));
        assertTrue(Duration.ofNanos(System.nanoTime() - started).compareTo(Duration.ofSeconds(10)) < 0,
                "run returned only after the program's own end");
        assertEquals("sh did not finish within 500 ms; killed it", e.getMessage());

        long pid = Long.parseLong(Files.readString(childPid).strip());
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false) && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "the child sleep " + pid + " survived");
    }

    @Test
    void outputLargerThanAPipeBufferDoesNotDeadlock() throws Exception {
        CommandResult result = commands.run(SHORT, "sh", "-c", "head -c 1000000 /dev/zero | tr '\\0' a; head -c 200000 /dev/zero >&2");
        assertEquals(1_000_000, result.stdout().length());
        assertEquals(200_000, result.stderr().length());
    }
}
