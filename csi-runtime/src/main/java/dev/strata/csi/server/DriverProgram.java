package dev.strata.csi.server;

import dev.strata.csi.BuildInfo;
import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.FlagSet;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.identity.PluginInfo;
import dev.strata.csi.log.CallLog;
import dev.strata.csi.log.JulBridge;
import dev.strata.csi.log.Log;
import io.grpc.BindableService;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The life of a server program: flags, socket, serving until SIGTERM, orderly stop. Exit codes:
 * 0 after a clean stop or --help, 1 when the server cannot start, 2 for a bad command line.
 */
public final class DriverProgram {

    public static final Flag ENDPOINT = new Flag("endpoint", "CSI_ENDPOINT", "unix:///csi/csi.sock",
            "CSI endpoint: the unix socket to serve on");
    public static final Flag DRIVER_NAME = new Flag("driver-name", "DRIVER_NAME", PluginInfo.DEFAULT_NAME,
            "driver name reported by GetPluginInfo; must match the CSIDriver object and StorageClasses");
    public static final Flag VERBOSITY = new Flag("v", "LOG_VERBOSITY", "0",
            "log verbosity: 0 logs calls, warnings and errors; 5 adds request bodies (secrets removed) and health checks");
    public static final Flag SHUTDOWN_GRACE = new Flag("shutdown-grace", "SHUTDOWN_GRACE", "30s",
            "on SIGTERM, how long calls in flight may run before they are cancelled");

    /** What a server is given to build its services from. */
    public record Context(FlagSet.Values flags, PluginInfo plugin, Log log) {}

    /** Builds a server's gRPC services; may reject its own flags. */
    @FunctionalInterface
    public interface Services {
        List<BindableService> create(Context context) throws UsageException;
    }

    private final FlagSet flagSet;
    private final Services services;

    public DriverProgram(String program, String summary, List<Flag> ownFlags, Services services) {
        List<Flag> all = new ArrayList<>(List.of(ENDPOINT, DRIVER_NAME, VERBOSITY, SHUTDOWN_GRACE));
        all.addAll(ownFlags);
        this.flagSet = new FlagSet(program, summary, all);
        this.services = services;
    }

    /** Runs until SIGTERM; returns the exit code. */
    public int run(String[] args, Map<String, String> env, PrintStream stdout, PrintStream stderr) {
        FlagSet.Values flags;
        Endpoint endpoint;
        Duration grace;
        Log log;
        List<BindableService> bound;
        try {
            FlagSet.Parsed parsed = flagSet.parse(args, env);
            if (parsed instanceof FlagSet.Help) {
                stdout.print(flagSet.usage());
                return 0;
            }
            if (parsed instanceof FlagSet.Version) {
                stdout.println(flagSet.program() + " " + BuildInfo.version());
                return 0;
            }
            flags = ((FlagSet.Run) parsed).values();
            endpoint = Endpoint.parse(flags.get(ENDPOINT));
            grace = flags.durationValue(SHUTDOWN_GRACE);
            log = new Log(stderr, flags.intValue(VERBOSITY, 0, 10));
            JulBridge.install(log);
            PluginInfo plugin = PluginInfo.of(flags.get(DRIVER_NAME), BuildInfo.version());
            bound = services.create(new Context(flags, plugin, log));
        } catch (UsageException e) {
            stderr.println(flagSet.program() + ": " + e.getMessage() + " (see --help)");
            return 2;
        }

        log.info("starting", "program", flagSet.program(), "version", BuildInfo.version(),
                "driver", flags.get(DRIVER_NAME));
        UnixSocketServer server;
        try {
            server = UnixSocketServer.start(endpoint, bound, new CallLog(log), log);
        } catch (StartupException e) {
            log.error("cannot start", "error", e.getMessage());
            return 1;
        }
        Thread stopper = new Thread(() -> server.stop(grace), "sigterm");
        Runtime.getRuntime().addShutdownHook(stopper);
        try {
            server.awaitTermination();
            stopper.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return 0;
    }
}
