package dev.strata.csi.log;

import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogManager;
import java.util.logging.LogRecord;
import java.util.logging.Logger;

/**
 * Sends what gRPC and Netty log through java.util.logging into our structured log, so the
 * driver's output stays one parseable line per event.
 */
public final class JulBridge extends Handler {

    private final Log log;
    /** java.util.logging holds loggers weakly; a level set on one nobody references is soon forgotten. */
    private final Logger nettyBootstrap = Logger.getLogger("io.grpc.netty.shaded.io.netty.bootstrap");
    private final Logger serverFrames = Logger.getLogger("io.grpc.netty.shaded.io.grpc.netty.NettyServerHandler");
    private final Logger clientFrames = Logger.getLogger("io.grpc.netty.shaded.io.grpc.netty.NettyClientHandler");

    private JulBridge(Log log) {
        this.log = log;
        // Netty warns on every connection that unix sockets have no SO_KEEPALIVE, which gRPC asks for.
        nettyBootstrap.setLevel(Level.SEVERE);
        // At FINE, gRPC logs every HTTP/2 frame with its headers: the agent token's authorization
        // header among them. Secrets never reach the log, whatever the verbosity.
        serverFrames.setLevel(Level.INFO);
        clientFrames.setLevel(Level.INFO);
    }

    public static void install(Log log) {
        LogManager.getLogManager().reset();
        Logger root = Logger.getLogger("");
        root.setLevel(log.debugEnabled() ? Level.FINE : Level.WARNING);
        root.addHandler(new JulBridge(log));
    }

    @Override
    public void publish(LogRecord record) {
        if (!isLoggable(record)) {
            return;
        }
        String message = record.getMessage();
        Object[] fields = {"logger", record.getLoggerName()};
        if (record.getLevel().intValue() >= Level.SEVERE.intValue()) {
            if (record.getThrown() != null) {
                log.error(message, record.getThrown(), fields);
            } else {
                log.error(message, fields);
            }
        } else if (record.getLevel().intValue() >= Level.WARNING.intValue()) {
            log.warn(message, fields);
        } else {
            log.debug(message, fields);
        }
    }

    @Override
    public void flush() {}

    @Override
    public void close() {}
}
