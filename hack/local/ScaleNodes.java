import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.AttachVolumeRequest;
import dev.strata.csi.agent.api.AttachVolumeResponse;
import dev.strata.csi.agent.api.CreateVolumeRequest;
import dev.strata.csi.agent.api.CreateVolumeResponse;
import dev.strata.csi.agent.api.DeleteVolumeRequest;
import dev.strata.csi.agent.api.DeleteVolumeResponse;
import dev.strata.csi.agent.api.DetachVolumeRequest;
import dev.strata.csi.agent.api.DetachVolumeResponse;
import dev.strata.csi.agent.api.GetVolumeRequest;
import dev.strata.csi.agent.api.GetVolumeResponse;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.Inventory;
import dev.strata.csi.agent.api.InventoryChanges;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.PoolStatus;
import dev.strata.csi.agent.api.ProbeRequest;
import dev.strata.csi.agent.api.ProbeResponse;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.RegisterResponse;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.auth.AgentSecurity;
import io.grpc.ManagedChannel;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;

/**
 * N node agents in one process, for the scale benchmark: each serves the real agent API
 * (NodeAgent) on its own port with an in-memory pool, answers after a delay like a real pool's,
 * and registers and renews its lease with controller-server, reporting its inventory as
 * node-server does (everything first, then the changes since the generation the controller
 * confirmed, pushed at once). A hung node accepts calls and never answers them, but renews.
 */
final class ScaleNodes implements AutoCloseable {

    static final long POOL_BYTES = 1L << 40;
    /** A real pool's call: a record read or written and fsynced, a sparse file made. */
    static final long CALL_DELAY_MICROS = 2_000;

    private final MultiThreadIoEventLoopGroup boss = new MultiThreadIoEventLoopGroup(1, NioIoHandler.newFactory());
    private final MultiThreadIoEventLoopGroup workers = new MultiThreadIoEventLoopGroup(2, NioIoHandler.newFactory());
    private final ScheduledExecutorService timers = Executors.newScheduledThreadPool(2);
    private final List<Node> nodes = new ArrayList<>();
    private final ManagedChannel registry;
    private final AgentSecurity security;
    private final long renewMillis;

    ScaleNodes(AgentSecurity security, String registryAddress, long renewMillis) {
        this.security = security;
        this.registry = security.channel(registryAddress);
        this.renewMillis = renewMillis;
    }

    /** Starts a node with {@code volumes} volumes (half of them published to it) and one snapshot; it registers at a random moment within one renewal interval. */
    Node start(String nodeId, int volumes, boolean hung) throws IOException {
        Node node = new Node(nodeId, hung);
        // Named as external-provisioner and external-snapshotter name them (pvc-<uid>, snapshot-<uid>);
        // every other one attached and published to its node, as a volume in use is.
        String first = null;
        for (int i = 0; i < volumes; i++) {
            String name = "pvc-" + UUID.randomUUID();
            first = first == null ? name : first;
            Volume.Builder image = Volume.newBuilder().setName(name).setCapacityBytes(1L << 30).setAllocation(Allocation.SPARSE);
            if (i % 2 == 0) {
                image.setDevicePath("/dev/loop" + i).addPublishedNodeIds(nodeId);
            }
            node.images.put(name, image.build());
        }
        String snapshot = "snapshot-" + UUID.randomUUID();
        node.snapshots.put(snapshot, Snapshot.newBuilder().setName(snapshot).setSourceVolume(first == null ? "" : first)
                .setCapacityBytes(1L << 30).build());
        node.server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", 0))
                .bossEventLoopGroup(boss).workerEventLoopGroup(workers).channelType(NioServerSocketChannel.class)
                .directExecutor()
                .addService(node.agent())
                .build().start();
        nodes.add(node);
        timers.schedule(node::renew, ThreadLocalRandom.current().nextLong(renewMillis), TimeUnit.MILLISECONDS);
        return node;
    }

    List<Node> nodes() {
        return nodes;
    }

    /** One simulated node. */
    final class Node {
        final String id;
        final boolean hung;
        final Map<String, Volume> images = new ConcurrentHashMap<>();
        final Map<String, Snapshot> snapshots = new ConcurrentHashMap<>();
        private final Map<String, Long> changed = new ConcurrentHashMap<>();
        private final AtomicLong generation = new AtomicLong();
        private final String instance = Long.toHexString(ThreadLocalRandom.current().nextLong());
        private volatile long confirmed = -1;
        private volatile boolean registered;
        private final java.util.concurrent.atomic.AtomicBoolean renewing = new java.util.concurrent.atomic.AtomicBoolean();
        private Server server;
        /**
         * Pools differ in size, as disks do: the order by available capacity (where a volume with
         * no topology goes) is not the order of the node ids, which would put the hung ones first.
         */
        private final long poolBytes = POOL_BYTES / 2 + ThreadLocalRandom.current().nextLong(POOL_BYTES / 2);

        Node(String id, boolean hung) {
            this.id = id;
            this.hung = hung;
        }

        boolean registered() {
            return registered;
        }

        private long change(String name) {
            long now = generation.incrementAndGet();
            changed.put(name, now);
            timers.execute(this::renew); // pushed at once, as node-server does
            return now;
        }

        /** Registers (first time: everything), renews, or pushes changes; reschedules itself at the interval. */
        void renew() {
            if (!renewing.compareAndSet(false, true)) {
                return;
            }
            long from = confirmed;
            long now = generation.get();
            RegisterRequest.Builder request = RegisterRequest.newBuilder().setNodeId(id)
                    .setAddress("127.0.0.1:" + server.getPort()).setInstance(instance).setGeneration(now)
                    .setPool(pool()).putTopology("topology.strata.csi.dev/node", id);
            if (from < 0) {
                request.setInventory(Inventory.newBuilder().addAllVolumes(images.values()).addAllSnapshots(snapshots.values()));
            } else if (from < now) {
                InventoryChanges.Builder changes = InventoryChanges.newBuilder().setBaseGeneration(from);
                changed.forEach((name, at) -> {
                    if (at > from) {
                        Volume image = images.get(name);
                        if (image != null) {
                            changes.addVolumes(image);
                        } else {
                            changes.addRemovedVolumes(name);
                        }
                    }
                });
                request.setChanges(changes);
            }
            AgentRegistryGrpc.newStub(registry).withCallCredentials(security.credentials()).withDeadlineAfter(10, TimeUnit.SECONDS)
                    .register(request.build(), new StreamObserver<>() {
                        @Override
                        public void onNext(RegisterResponse reply) {
                            confirmed = reply.getSendInventory() ? -1 : now;
                            registered = true;
                        }

                        @Override
                        public void onError(Throwable t) {
                            confirmed = -1;
                            done(false);
                        }

                        @Override
                        public void onCompleted() {
                            done(true);
                        }
                    });
        }

        private void done(boolean answered) {
            renewing.set(false);
            if (answered && confirmed < generation.get()) {
                timers.execute(this::renew);
            } else {
                timers.schedule(this::renew, renewMillis, TimeUnit.MILLISECONDS);
            }
        }

        private PoolStatus pool() {
            long used = images.values().stream().mapToLong(Volume::getCapacityBytes).sum();
            return PoolStatus.newBuilder().setTotalBytes(poolBytes).setAvailableBytes(poolBytes - used).setVolumeCount(images.size()).build();
        }

        /** Answers after the pool's delay; a hung node never answers. */
        private <T> void answer(StreamObserver<T> out, java.util.function.Supplier<T> reply) {
            if (hung) {
                return;
            }
            timers.schedule(() -> {
                try {
                    out.onNext(reply.get());
                    out.onCompleted();
                } catch (io.grpc.StatusRuntimeException e) {
                    out.onError(e);
                }
            }, CALL_DELAY_MICROS, TimeUnit.MICROSECONDS);
        }

        NodeAgentGrpc.NodeAgentImplBase agent() {
            return new NodeAgentGrpc.NodeAgentImplBase() {
                @Override
                public void createVolume(CreateVolumeRequest request, StreamObserver<CreateVolumeResponse> out) {
                    answer(out, () -> {
                        Volume image = images.computeIfAbsent(request.getName(), name -> Volume.newBuilder().setName(name)
                                .setCapacityBytes(request.getCapacityBytes()).setAllocation(request.getAllocation()).build());
                        if (image.getCapacityBytes() != request.getCapacityBytes()) {
                            throw Status.ALREADY_EXISTS.withDescription("another size").asRuntimeException();
                        }
                        return CreateVolumeResponse.newBuilder().setVolume(image).setGeneration(change(request.getName())).build();
                    });
                }

                @Override
                public void deleteVolume(DeleteVolumeRequest request, StreamObserver<DeleteVolumeResponse> out) {
                    answer(out, () -> {
                        images.remove(request.getName());
                        return DeleteVolumeResponse.newBuilder().setGeneration(change(request.getName())).build();
                    });
                }

                @Override
                public void getVolume(GetVolumeRequest request, StreamObserver<GetVolumeResponse> out) {
                    answer(out, () -> {
                        Volume image = images.get(request.getName());
                        if (image == null) {
                            throw Status.NOT_FOUND.withDescription("no such volume").asRuntimeException();
                        }
                        return GetVolumeResponse.newBuilder().setVolume(image).build();
                    });
                }

                @Override
                public void attachVolume(AttachVolumeRequest request, StreamObserver<AttachVolumeResponse> out) {
                    answer(out, () -> AttachVolumeResponse.newBuilder().setVolume(images.get(request.getName()).toBuilder()
                            .setDevicePath("/dev/loop0")).build());
                }

                @Override
                public void detachVolume(DetachVolumeRequest request, StreamObserver<DetachVolumeResponse> out) {
                    answer(out, DetachVolumeResponse::getDefaultInstance);
                }

                @Override
                public void probe(ProbeRequest request, StreamObserver<ProbeResponse> out) {
                    answer(out, ProbeResponse::getDefaultInstance);
                }
            };
        }
    }

    /** Names of the nodes, healthy ones only. */
    List<String> healthy() {
        return nodes.stream().filter(node -> !node.hung).map(node -> node.id).collect(Collectors.toList());
    }

    @Override
    public void close() {
        timers.shutdownNow();
        nodes.forEach(node -> node.server.shutdownNow());
        registry.shutdownNow();
        boss.shutdownGracefully();
        workers.shutdownGracefully();
    }
}
