package dev.strata.csi.server;

import dev.strata.csi.BuildInfo;
import dev.strata.csi.flags.Flag;
import dev.strata.csi.flags.FlagSet;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.identity.PluginInfo;
import dev.strata.csi.log.CallLog;
import dev.strata.csi.log.JulBridge;
import dev.strata.csi.log.Log;
import dev.strata.csi.log.LogFormat;
import dev.strata.csi.log.JsonConsole;
import dev.strata.csi.metrics.OperationMetrics;
import io.grpc.BindableService;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

/**
 * The life of a server program: flags, socket, serving until SIGTERM, orderly stop. Exit codes:
 * 0 after a clean stop or --help, 1 when the server cannot start, 2 for a bad command line.
 */
public final class DriverProgram {

    public static final Flag ENDPOINT = new Flag("endpoint", "CSI_ENDPOINT", "unix:///csi/csi.sock",
            "CSI endpoint: the unix socket to serve on");
    public static final Flag DRIVER_NAME = Flag.of("driver-name", PluginInfo.DEFAULT_NAME,
            "driver name reported by GetPluginInfo; must match the CSIDriver object and StorageClasses");
    public static final Flag VERBOSITY = new Flag("v", "LOG_VERBOSITY", "0",
            "log verbosity: 0 logs calls, warnings and errors; 5 adds request bodies (secrets removed) and health checks");
    public static final Flag SHUTDOWN_GRACE = Flag.of("shutdown-grace", "30s",
            "on SIGTERM, how long calls in flight may run before they are cancelled");
    public static final Flag LOG_FORMAT = Flag.of("log-format", "text",
            "text: logfmt lines; json: one JSON object per line (time, level, msg and the event's fields), "
                    + "on stdout and stderr alike");
    public static final Flag HTTP_ENDPOINT = Flag.of("http-endpoint", "",
            "host:port serving /metrics (Prometheus) and /healthz (200 once ready, 503 before), as the sidecars' "
                    + "--http-endpoint; empty: no HTTP server");

    /** What a server is given to build its services from; its metrics go into {@code metrics}. */
    public record Context(FlagSet.Values flags, PluginInfo plugin, Log log, PrometheusRegistry metrics, Map<String, String> environment) {}

    /**
     * What a program serves: CSI services on the socket and components beside them, and whether
     * it is ready (what Probe answers; /healthz says 200 only when this is true and the socket is open).
     */
    public record Plan(List<BindableService> csiServices, List<Component> components, BooleanSupplier ready) {

        public Plan(List<BindableService> csiServices, List<Component> components) {
            this(csiServices, components, () -> true);
        }

        public Plan(List<BindableService> csiServices) {
            this(csiServices, List.of());
        }
    }

    /** Builds a program's plan from its flags; may reject them. */
    @FunctionalInterface
    public interface Services {
        Plan create(Context context) throws UsageException;
    }

    private final FlagSet flagSet;
    private final Services services;

    public DriverProgram(String program, String summary, List<Flag> ownFlags, Services services) {
        List<Flag> all = new ArrayList<>(List.of(ENDPOINT, DRIVER_NAME, VERBOSITY, LOG_FORMAT, SHUTDOWN_GRACE, HTTP_ENDPOINT));
        all.addAll(ownFlags);
        this.flagSet = new FlagSet(program, summary, all);
        this.services = services;
    }

    /**
     * Runs until SIGTERM; returns the exit code. With {@code --log-format=json} the process's
     * console is taken over once the flags are read (see {@link JsonConsole}).
     */
    public int run(String[] args, Map<String, String> env, PrintStream stdout, PrintStream stderr) {
        // Known before the flags are parsed, so that a bad command line is reported in the format asked for.
        LogFormat format = LogFormat.requested(List.of(args), env);
        FlagSet.Values flags;
        Endpoint endpoint;
        Duration grace;
        Log log;
        Plan plan;
        Optional<InetSocketAddress> httpAddress;
        PrometheusRegistry metrics = new PrometheusRegistry();
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
            httpAddress = flags.get(HTTP_ENDPOINT).isEmpty() ? Optional.empty()
                    : Optional.of(TcpComponent.address(HTTP_ENDPOINT.name(), flags.get(HTTP_ENDPOINT)));
            format = LogFormat.parse(flags.get(LOG_FORMAT));
            int verbosity = flags.intValue(VERBOSITY, 0, 10);
            log = format == LogFormat.JSON ? JsonConsole.install(verbosity) : new Log(stderr, verbosity);
            JulBridge.install(log);
            PluginInfo plugin = PluginInfo.of(flags.get(DRIVER_NAME), BuildInfo.version());
            plan = services.create(new Context(flags, plugin, log, metrics, env));
        } catch (UsageException e) {
            String message = flagSet.program() + ": " + e.getMessage() + " (see --help)";
            if (format == LogFormat.JSON) {
                new Log(stderr, 0, format).error(message, "program", flagSet.program());
            } else {
                stderr.println(message);
            }
            return 2;
        }
        Log uncaught = log;
        Thread.setDefaultUncaughtExceptionHandler((thread, e) ->
                uncaught.error("uncaught exception", e, "thread", thread.getName()));

        log.info("starting", "program", flagSet.program(), "version", BuildInfo.version(),
                "driver", flags.get(DRIVER_NAME));
        List<Component> started = new ArrayList<>();
        GrpcServer server;
        AtomicBoolean serving = new AtomicBoolean();
        BooleanSupplier planReady = plan.ready();
        List<Component> components = new ArrayList<>();
        // First, so that /healthz answers 503 (not a refused connection) while the others start.
        httpAddress.ifPresent(address -> components.add(
                new HttpEndpoint(address, metrics, () -> serving.get() && planReady.getAsBoolean(), log)));
        components.addAll(plan.components());
        try {
            for (Component component : components) {
                component.start();
                started.add(component);
            }
            // The metrics interceptor outermost: it sees the INTERNAL that CallLog answers for a handler that threw.
            server = GrpcServer.onUnixSocket(endpoint, plan.csiServices(),
                    List.of(new OperationMetrics(metrics, flags.get(DRIVER_NAME)), new CallLog(log)), log);
        } catch (StartupException e) {
            log.error("cannot start", "error", e.getMessage());
            started.reversed().forEach(component -> component.stop(grace));
            return 1;
        }
        serving.set(true);
        Thread stopper = new Thread(() -> {
            serving.set(false);
            server.stop(grace);
            started.reversed().forEach(component -> component.stop(grace));
        }, "sigterm");
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
