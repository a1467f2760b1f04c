package dev.strata.csi.testing;

import dev.strata.csi.flags.Flag;
import dev.strata.csi.identity.IdentityService;
import dev.strata.csi.server.Component;
import dev.strata.csi.server.DriverProgram;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * A test program on the real server runtime whose Probe takes as long as {@code --probe-delay}
 * says, to have a call in flight when SIGTERM arrives; with {@code --start-gate FILE}, its start
 * waits until that file exists, as a node-server's does while it reconciles its pool.
 */
public final class SlowProbeDriver {

    static final Flag PROBE_DELAY = new Flag("probe-delay", null, "0ms", "how long Probe takes");
    static final Flag START_GATE = new Flag("start-gate", null, "", "a file whose existence the start waits for");

    private SlowProbeDriver() {}

    public static void main(String[] args) {
        DriverProgram program = new DriverProgram("slow-probe-driver", "test program", List.of(PROBE_DELAY, START_GATE),
                context -> {
                    long delayMillis = context.flags().durationValue(PROBE_DELAY).toMillis();
                    return new DriverProgram.Plan(List.of(new IdentityService(context.plugin(), List.of(), () -> {
                        context.log().info("probe started");
                        try {
                            Thread.sleep(delayMillis);
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                            return false;
                        }
                        return true;
                    })), List.of(new Gate(context.flags().get(START_GATE))));
                });
        System.exit(program.run(args, System.getenv(), System.out, System.err));
    }

    /** Holds the start until its file exists. */
    private record Gate(String file) implements Component {
        @Override
        public void start() {
            while (!file.isEmpty() && !Files.exists(Path.of(file))) {
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }

        @Override
        public void stop(Duration grace) {}
    }
}
