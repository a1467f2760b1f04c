package dev.strata.csi.testing;

import dev.strata.csi.flags.Flag;
import dev.strata.csi.identity.IdentityService;
import dev.strata.csi.server.DriverProgram;
import java.util.List;

/**
 * A test program on the real server runtime whose Probe takes as long as {@code --probe-delay}
 * says, to have a call in flight when SIGTERM arrives.
 */
public final class SlowProbeDriver {

    static final Flag PROBE_DELAY = new Flag("probe-delay", null, "0ms", "how long Probe takes");

    private SlowProbeDriver() {}

    public static void main(String[] args) {
        DriverProgram program = new DriverProgram("slow-probe-driver", "test program", List.of(PROBE_DELAY),
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
                    })));
                });
        System.exit(program.run(args, System.getenv(), System.out, System.err));
    }
}
