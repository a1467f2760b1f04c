package dev.strata.csi.node.agent;

import dev.strata.csi.flags.UsageException;
import dev.strata.csi.log.Log;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The controller-server replicas a node agent registers with: the host:port entries of
 * {@code --controller-address}, each name resolved afresh at every renewal into all its addresses
 * (a headless Service names one address per controller pod). A name that cannot be resolved for a
 * moment keeps the addresses it had, so a DNS hiccup never drops a live controller.
 */
public final class ControllerAddresses {

    /** One entry of the flag. */
    public record HostPort(String host, int port) {}

    /** Name resolution; the system's in production, a stand-in in tests. */
    @FunctionalInterface
    public interface Resolver {
        List<InetAddress> resolve(String host) throws UnknownHostException;
    }

    public static final Resolver SYSTEM = host -> Arrays.asList(InetAddress.getAllByName(host));

    private final List<HostPort> entries;
    private final Resolver resolver;
    private final Log log;
    private final Map<HostPort, Set<String>> lastResolved = new HashMap<>();

    public ControllerAddresses(List<HostPort> entries, Resolver resolver, Log log) {
        this.entries = List.copyOf(entries);
        this.resolver = resolver;
        this.log = log;
    }

    /** The entries of a comma-separated list of host:port ({@code [v6]:port} for an IPv6 literal). */
    public static List<HostPort> parse(String flag, String value) throws UsageException {
        List<HostPort> entries = new ArrayList<>();
        for (String item : value.split(",", -1)) {
            String entry = item.strip();
            try {
                URI uri = new URI("tcp://" + entry);
                if (uri.getHost() == null || uri.getPort() <= 0 || !entry.equals(uri.getAuthority())) {
                    throw new URISyntaxException(entry, "not host:port");
                }
                String host = uri.getHost().startsWith("[") ? uri.getHost().substring(1, uri.getHost().length() - 1) : uri.getHost();
                entries.add(new HostPort(host, uri.getPort()));
            } catch (URISyntaxException e) {
                throw new UsageException("flag --" + flag + " takes a comma-separated list of host:port, got '" + item + "' in '" + value + "'");
            }
        }
        return entries;
    }

    /**
     * Every address the entries stand for now, as gRPC targets ({@code ip:port}, {@code [v6]:port}),
     * in the order given. Called by one thread (the registration loop).
     */
    public Set<String> resolve() {
        Set<String> targets = new LinkedHashSet<>();
        for (HostPort entry : entries) {
            try {
                Set<String> resolved = new LinkedHashSet<>();
                for (InetAddress address : resolver.resolve(entry.host())) {
                    String ip = address.getHostAddress();
                    resolved.add((address instanceof Inet6Address ? "[" + ip + "]" : ip) + ":" + entry.port());
                }
                lastResolved.put(entry, resolved);
            } catch (UnknownHostException e) {
                log.warn("cannot resolve controller address; keeping the addresses it had", "controller", entry.host(),
                        "error", e.getMessage(), "kept", String.join(",", lastResolved.getOrDefault(entry, Set.of())));
            }
            targets.addAll(lastResolved.getOrDefault(entry, Set.of()));
        }
        return targets;
    }
}
