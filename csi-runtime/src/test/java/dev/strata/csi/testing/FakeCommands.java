package dev.strata.csi.testing;

import dev.strata.csi.system.CommandResult;
import dev.strata.csi.system.Commands;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/** Stands in for the tools: records each command line and answers with a scripted result. */
public final class FakeCommands implements Commands {

    private final Function<List<String>, CommandResult> answer;
    private final List<List<String>> calls = new ArrayList<>();

    /** Every command succeeds silently. */
    public FakeCommands() {
        this(argv -> new CommandResult(0, "", ""));
    }

    public FakeCommands(Function<List<String>, CommandResult> answer) {
        this.answer = answer;
    }

    @Override
    public CommandResult run(Duration timeout, String... argv) {
        List<String> call = List.of(argv);
        calls.add(call);
        return answer.apply(call);
    }

    /** The command lines run so far, in order. */
    public List<List<String>> calls() {
        return List.copyOf(calls);
    }
}
