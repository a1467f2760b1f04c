package dev.strata.csi.node.agent;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.RegisterResponse;
import dev.strata.csi.auth.AgentSecurity;
import dev.strata.csi.auth.AgentToken;
import dev.strata.csi.flags.UsageException;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.fs.SystemFilesystemFreezer;
import dev.strata.csi.node.local.image.SystemImageFiles;
import dev.strata.csi.node.local.image.SystemLoopDevices;
import dev.strata.csi.node.local.pool.ImagePool;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.mount.MountHelpers;
import dev.strata.csi.node.mount.SystemFilesystemStats;
import dev.strata.csi.node.mount.SystemMounter;
import dev.strata.csi.server.TcpComponent;
import dev.strata.csi.system.Command;
import dev.strata.csi.system.Crashes;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The agent registers with every controller address: a name resolving to several addresses (as a
 * headless Service does, one per controller pod) is resolved again at every renewal, addresses
 * that appear get registrations and those that go away get none, and a controller that accepts
 * connections but never answers holds up nobody else. The controllers are recording stand-ins for
 * the agent registry, each on its own loopback address (127.0.0.2, .3, .4) and one port; the name
 * is resolved by a stand-in resolver the test changes.
 */
class RegistrationTest {

    static final String NAME = "controllers.test";

    @TempDir
    Path dir;
    final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    final Log log = new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0);
    final List<TcpComponent> servers = new ArrayList<>();
    final List<AutoCloseable> closing = new ArrayList<>();

    /** Answers every registration with a renewal second later and counts them. */
    static final class RecordingRegistry extends AgentRegistryGrpc.AgentRegistryImplBase {
        final AtomicInteger count = new AtomicInteger();
        final List<RegisterRequest> requests = new CopyOnWriteArrayList<>();

        @Override
        public void register(RegisterRequest request, StreamObserver<RegisterResponse> response) {
            requests.add(request);
            count.incrementAndGet();
            response.onNext(RegisterResponse.newBuilder().setRenewSeconds(1).build());
            response.onCompleted();
        }
    }

    @AfterEach
    void stop() throws Exception {
        for (AutoCloseable resource : closing.reversed()) {
            resource.close();
        }
        servers.forEach(server -> server.stop(Duration.ZERO));
    }

    RecordingRegistry registry(String ip, int port) throws Exception {
        RecordingRegistry registry = new RecordingRegistry();
        TcpComponent server = new TcpComponent(new InetSocketAddress(ip, port), Optional.empty(), List.of(registry), List.of(), log);
        server.start();
        servers.add(server);
        return registry;
    }

    int port(String ip) throws Exception {
        try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getByName(ip))) {
            return socket.getLocalPort();
        }
    }

    /** A controller that takes connections and never answers: each registration with it waits for its deadline. */
    void silentController(String ip, int port) throws Exception {
        ServerSocket socket = new ServerSocket(port, 50, InetAddress.getByName(ip));
        List<Socket> accepted = new CopyOnWriteArrayList<>();
        Thread acceptor = Thread.ofVirtual().start(() -> {
            try {
                while (true) {
                    accepted.add(socket.accept());
                }
            } catch (java.io.IOException closed) {
                // the test is over
            }
        });
        closing.add(() -> {
            socket.close();
            acceptor.join();
            for (Socket connection : accepted) {
                connection.close();
            }
        });
    }

    Registration registration(String flag, ControllerAddresses.Resolver resolver) throws Exception {
        Path token = Files.writeString(dir.resolve("token"), "registration-test-token-0123456789\n");
        AgentSecurity security = new AgentSecurity(AgentSecurity.Side.NODE, AgentToken.fromFile(token), Optional.empty(), Optional.empty(), Optional.empty(), Optional.empty());
        Kernel kernel = new Kernel();
        ImagePool pool = new ImagePool(Files.createDirectories(dir.resolve("pool")),
                new SystemImageFiles(kernel, new SystemFilesystemStats()), new SystemLoopDevices(kernel),
                new SystemMounter(kernel, new Command(), MountHelpers.system()), new SystemFilesystemFreezer(kernel), Crashes.none(), Clock.systemUTC(), log);
        NodePools pools = new NodePools(pool, Optional.empty());
        Registration registration = new Registration(new ControllerAddresses(ControllerAddresses.parse("controller-address", flag),
                resolver, log), "node-r", "127.0.0.1", () -> 9870, Map.of("topology.strata.csi.dev/node", "node-r"), pools, new Inventory(pools, new SnapshotTombstones(dir.resolve("tombstones"))), security, log);
        registration.start();
        closing.add(() -> registration.stop(Duration.ofSeconds(5)));
        return registration;
    }

    static InetAddress ip(String literal) throws UnknownHostException {
        return InetAddress.getByName(literal);
    }

    String logs() {
        return logged.toString(StandardCharsets.UTF_8);
    }

    void await(String what, Duration within, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + within.toNanos();
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("not within " + within + ": " + what + "\n" + logs());
            }
            Thread.sleep(50);
        }
    }

    @Test
    void registersWithEveryAddressOfANameResolvedAgainAtEveryRenewal() throws Exception {
        int port = port("127.0.0.2");
        RecordingRegistry first = registry("127.0.0.2", port);
        RecordingRegistry second = registry("127.0.0.3", port);
        RecordingRegistry third = registry("127.0.0.4", port);
        silentController("127.0.0.5", port);
        AtomicReference<Object> resolved = new AtomicReference<>(List.of(ip("127.0.0.2"), ip("127.0.0.3")));
        long started = System.nanoTime();
        registration(NAME + ":" + port + ", 127.0.0.5:" + port, host -> {
            if (!host.equals(NAME)) {
                return ControllerAddresses.SYSTEM.resolve(host);
            }
            if (resolved.get() instanceof UnknownHostException e) {
                throw e;
            }
            @SuppressWarnings("unchecked")
            List<InetAddress> addresses = (List<InetAddress>) resolved.get();
            return addresses;
        });

        // Both replicas get the registration and its renewals every second, while the silent one
        // keeps each of its attempts waiting for the 10 s deadline.
        await("three registrations with each replica", Duration.ofSeconds(8), () -> first.count.get() >= 3 && second.count.get() >= 3);
        assertTrue(System.nanoTime() - started < Duration.ofSeconds(9).toNanos(), "the silent controller held the others up");
        RegisterRequest request = first.requests.getFirst();
        assertEquals("node-r", request.getNodeId());
        assertEquals("127.0.0.1:9870", request.getAddress());
        assertTrue(request.getPool().getTotalBytes() > 0, "the pool's capacity is reported: " + request);
        assertEquals(0, third.count.get(), "an address the name does not resolve to gets nothing");
        for (String address : List.of("127.0.0.2", "127.0.0.3", "127.0.0.5")) {
            assertTrue(logs().contains("msg=\"controller address appeared; registering there\" controller=" + address + ":" + port),
                    address + " was logged as it appeared:\n" + logs());
        }

        // A replica goes, another comes: the next renewal follows the name.
        resolved.set(List.of(ip("127.0.0.3"), ip("127.0.0.4")));
        await("a registration with the new replica", Duration.ofSeconds(5), () -> third.count.get() >= 1);
        await("the departure logged", Duration.ofSeconds(5),
                () -> logs().contains("msg=\"controller address went away; no longer registering there\" controller=127.0.0.2:" + port));
        int left = first.count.get();
        int before = second.count.get();
        // Two renewals of the remaining replica (about 2 s; longer on a busy machine), and none meanwhile to the one that went.
        await("the remaining replica still renewed", Duration.ofSeconds(15), () -> second.count.get() >= before + 2);
        assertEquals(left, first.count.get(), "no registration goes to an address that went away");

        // The name cannot be resolved for a while: the replicas it had keep their registrations.
        resolved.set(new UnknownHostException(NAME + ": Temporary failure in name resolution"));
        await("the failed lookup logged", Duration.ofSeconds(5), () -> logs().contains("cannot resolve controller address"));
        int third0 = third.count.get();
        int second0 = second.count.get();
        await("renewals going on while the name cannot be resolved", Duration.ofSeconds(15),
                () -> third.count.get() >= third0 + 2 && second.count.get() >= second0 + 2);
        await("the silent controller's attempt timed out and logged", Duration.ofSeconds(8), () -> logs().contains(
                "msg=\"cannot register with controller; retrying\" controller=127.0.0.5:" + port + " code=DEADLINE_EXCEEDED"));
    }

    @Test
    void theFlagTakesAListOfHostPort() throws Exception {
        assertEquals(List.of(new ControllerAddresses.HostPort("strata-controller-agents.strata-system.svc", 9869),
                        new ControllerAddresses.HostPort("10.0.0.7", 9869), new ControllerAddresses.HostPort("fd00::7", 9869)),
                ControllerAddresses.parse("controller-address", "strata-controller-agents.strata-system.svc:9869, 10.0.0.7:9869,[fd00::7]:9869"));
        for (String bad : List.of("", "controller", "controller:", "controller:0", ":9869", "a:1,,b:2", "a:1,", "http://a:1", "a:1/x", "fd00::7:9869")) {
            UsageException e = assertThrows(UsageException.class, () -> ControllerAddresses.parse("controller-address", bad), bad);
            assertTrue(e.getMessage().startsWith("flag --controller-address takes a comma-separated list of host:port"), e.getMessage());
        }
    }
}
