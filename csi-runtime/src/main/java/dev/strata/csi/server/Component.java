package dev.strata.csi.server;

import java.time.Duration;

/**
 * Something a program runs beside its CSI socket: the node agent's server, its registration
 * loop, the controller's agent registry. Started in order before the CSI socket opens, stopped
 * in reverse order after it closes.
 */
public interface Component {

    void start() throws StartupException;

    void stop(Duration grace);
}
