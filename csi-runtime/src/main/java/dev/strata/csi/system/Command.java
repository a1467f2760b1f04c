package dev.strata.csi.system;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** The real {@link Commands}: starts the program as a child process. */
public final class Command implements Commands {

    private static final File NO_INPUT = new File("/dev/null");

    @Override
    public CommandResult run(Duration timeout, String... argv) throws CommandException {
        return run(timeout, null, argv);
    }

    @Override
    public CommandResult run(Duration timeout, byte[] input, String... argv) throws CommandException {
        if (argv.length == 0) {
            throw new IllegalArgumentException("no program to run");
        }
        String program = argv[0];
        long deadline = System.nanoTime() + timeout.toNanos();
        ProcessBuilder builder = new ProcessBuilder(argv);
        if (input == null) {
            builder.redirectInput(NO_INPUT);
        }
        // Tools' messages are quoted in errors and their output is parsed; keep both in one language.
        builder.environment().put("LC_ALL", "C");
        Process process;
        try {
            process = builder.start();
        } catch (IOException e) {
            throw new CommandException("cannot start " + program + ": " + e.getMessage(), e);
        }
        FutureTask<String> stdout = drain(process.getInputStream());
        FutureTask<String> stderr = drain(process.getErrorStream());
        if (input != null) {
            // A program that exits before reading it all closes the pipe: its exit status tells what went wrong.
            try (var stdin = process.getOutputStream()) {
                stdin.write(input);
            } catch (IOException e) {
                // the result below says why the program stopped
            }
        }
        try {
            if (!process.waitFor(remaining(deadline), TimeUnit.NANOSECONDS)) {
                kill(process);
                throw CommandException.timedOut(program + " did not finish within " + timeout.toMillis() + " ms; killed it");
            }
            // A child that outlives the program can keep the pipes open; the deadline covers that too.
            return new CommandResult(process.exitValue(),
                    stdout.get(remaining(deadline), TimeUnit.NANOSECONDS),
                    stderr.get(remaining(deadline), TimeUnit.NANOSECONDS));
        } catch (TimeoutException e) {
            throw new CommandException(program + " exited but a process it started kept its output open past "
                    + timeout.toMillis() + " ms");
        } catch (InterruptedException e) {
            kill(process);
            Thread.currentThread().interrupt();
            throw new CommandException(program + " was interrupted; killed it", e);
        } catch (ExecutionException e) {
            throw new CommandException("cannot read the output of " + program + ": " + e.getCause().getMessage(), e);
        }
    }

    private static long remaining(long deadline) {
        return Math.max(0, deadline - System.nanoTime());
    }

    private static FutureTask<String> drain(InputStream stream) {
        FutureTask<String> task = new FutureTask<>(() -> {
            try (stream) {
                return new String(stream.readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
        Thread.ofPlatform().daemon().name("command-output").start(task);
        return task;
    }

    /** Kills the program and everything it started; the children are listed first, since they are re-parented once it dies. */
    private static void kill(Process process) {
        List<ProcessHandle> children = process.descendants().toList();
        process.destroyForcibly();
        children.forEach(ProcessHandle::destroyForcibly);
        try {
            process.waitFor(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
