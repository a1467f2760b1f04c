package dev.strata.csi.server;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import dev.strata.csi.log.Log;
import io.prometheus.metrics.exporter.httpserver.MetricsHandler;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.BooleanSupplier;

/**
 * The servers' HTTP endpoint ({@code --http-endpoint}), as the CSI sidecars have one:
 * {@code /metrics} in Prometheus' text format and {@code /healthz}, 200 once the server is ready
 * (its CSI socket open, its Probe ready) and 503 before. Served by the JDK's own HTTP server on
 * one thread: a scrape every few seconds needs no more.
 */
public final class HttpEndpoint implements Component {

    private final InetSocketAddress address;
    private final PrometheusRegistry registry;
    private final BooleanSupplier ready;
    private final Log log;
    private HttpServer server;
    private ExecutorService thread;

    public HttpEndpoint(InetSocketAddress address, PrometheusRegistry registry, BooleanSupplier ready, Log log) {
        this.address = address;
        this.registry = registry;
        this.ready = ready;
        this.log = log;
    }

    @Override
    public void start() throws StartupException {
        try {
            server = HttpServer.create(address, 16);
        } catch (IOException e) {
            throw new StartupException("cannot listen on http://" + address.getHostString() + ":" + address.getPort()
                    + ": " + e.getMessage(), e);
        }
        server.createContext("/metrics", new MetricsHandler(registry));
        server.createContext("/healthz", this::healthz);
        thread = Executors.newSingleThreadExecutor(Thread.ofPlatform().name("http").daemon().factory());
        server.setExecutor(thread);
        server.start();
        log.info("serving metrics and health", "endpoint",
                "http://" + server.getAddress().getHostString() + ":" + server.getAddress().getPort());
    }

    private void healthz(HttpExchange exchange) throws IOException {
        try (exchange) {
            if (!exchange.getRequestURI().getPath().equals("/healthz")) {
                exchange.sendResponseHeaders(404, -1);
                return;
            }
            boolean up = ready.getAsBoolean();
            byte[] body = (up ? "ok\n" : "not ready\n").getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
            exchange.sendResponseHeaders(up ? 200 : 503, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        }
    }

    @Override
    public void stop(Duration grace) {
        server.stop(0);
        thread.shutdown();
    }
}
