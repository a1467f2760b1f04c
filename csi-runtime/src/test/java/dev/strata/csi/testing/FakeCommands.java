package dev.strata.csi.testing;

import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.system.Commands;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/** Stands in for the tools: records each command line and answers with a scripted result. */
public final class FakeCommands implements Commands {

    /** The scripted answer to one command line; throwing stands for a tool that cannot start or times out. */
    @FunctionalInterface
    public interface Answer {
        CommandResult apply(List<String> argv) throws CommandException;
    }

    private final Answer answer;
    private final List<List<String>> calls = new ArrayList<>();

    /** Every command succeeds silently. */
    public FakeCommands() {
        this(argv -> new CommandResult(0, "", ""));
    }

    public FakeCommands(Answer answer) {
        this.answer = answer;
    }

    @Override
    public CommandResult run(Duration timeout, String... argv) throws CommandException {
        List<String> call = List.of(argv);
        calls.add(call);
        return answer.apply(call);
    }

    /** The command lines run so far, in order. */
    public List<List<String>> calls() {
        return List.copyOf(calls);
    }
}
