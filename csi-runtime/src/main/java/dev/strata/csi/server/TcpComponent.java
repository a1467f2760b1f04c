package dev.strata.csi.server;

import dev.strata.csi.log.CallLog;
import dev.strata.csi.log.Log;
import io.grpc.BindableService;
import io.grpc.ServerInterceptor;
import io.grpc.netty.shaded.io.netty.handler.ssl.SslContext;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * A gRPC server on TCP run beside the CSI socket: the node agent's API, the controller's agent
 * registry. Every call is logged as the CSI socket's are, then passes {@code interceptors} (the
 * agent channel's checks of its caller, outermost first).
 */
public final class TcpComponent implements Component {

    private final InetSocketAddress address;
    private final Optional<SslContext> tls;
    private final List<BindableService> services;
    private final List<ServerInterceptor> interceptors;
    private final Log log;
    private GrpcServer server;

    public TcpComponent(InetSocketAddress address, Optional<SslContext> tls, List<BindableService> services,
            List<ServerInterceptor> interceptors, Log log) {
        this.address = address;
        this.tls = tls;
        this.services = services;
        List<ServerInterceptor> all = new java.util.ArrayList<>(List.of(new CallLog(log)));
        all.addAll(interceptors);
        this.interceptors = List.copyOf(all);
        this.log = log;
    }

    @Override
    public void start() throws StartupException {
        server = GrpcServer.onTcp(address, tls, services, interceptors, log);
    }

    /** The port it listens on, once started. */
    public int port() {
        return server.port();
    }

    @Override
    public void stop(Duration grace) {
        server.stop(grace);
    }

    /** Parses {@code host:port} (host may be empty or 0.0.0.0 for every interface). */
    public static InetSocketAddress address(String flag, String value) throws dev.strata.csi.flags.UsageException {
        int colon = value.lastIndexOf(':');
        try {
            int port = Integer.parseInt(value.substring(colon + 1));
            String host = value.substring(0, Math.max(colon, 0));
            if (colon < 0 || port < 0 || port > 65535) {
                throw new NumberFormatException();
            }
            return host.isEmpty() ? new InetSocketAddress(port) : new InetSocketAddress(host, port);
        } catch (NumberFormatException e) {
            throw new dev.strata.csi.flags.UsageException("flag --" + flag + " takes host:port, got '" + value + "'");
        }
    }
}
