package dev.strata.csi.e2e;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.ReceiveVolumeRequest;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.ListVolumesRequest;
import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.agent.api.WriteContentRequest;
import dev.strata.csi.agent.api.WriteContentResponse;
import dev.strata.csi.auth.AgentToken;
import dev.strata.csi.controller.local.ContentRelay;
import dev.strata.csi.controller.local.RelayMetrics;
import dev.strata.csi.log.Log;
import io.grpc.CallCredentials;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.stub.StreamObserver;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/** The test in controller-server's place: its ContentRelay, and the cluster's agents called with the cluster's token. */
final class Relays {

    private final Cluster cluster;
    private final CallCredentials token;

    Relays(Cluster cluster) throws Exception {
        this.cluster = cluster;
        this.token = AgentToken.fromFile(cluster.tokenFile()).credentials();
    }

    CallCredentials token() {
        return token;
    }

    /** A channel to the agent of {@code node} as it listens now (a restart changes its port). */
    ManagedChannel channel(String node) throws InterruptedException {
        return NettyChannelBuilder.forAddress("127.0.0.1", cluster.agentPort(node)).usePlaintext().build();
    }

    /** What the pool of {@code node} offers a new volume (the figure GetCapacity answers), asked of its agent now. */
    long poolAvailable(String node) throws InterruptedException {
        ManagedChannel channel = channel(node);
        try {
            return NodeAgentGrpc.newBlockingStub(channel).withCallCredentials(token).withDeadlineAfter(30, TimeUnit.SECONDS)
                    .listVolumes(ListVolumesRequest.getDefaultInstance()).getPool().getAvailableBytes();
        } finally {
            channel.shutdownNow();
        }
    }

    /** What controller-server asks the target node for: the image pool, no encryption. */
    static ReceiveVolumeRequest receive(String name, ContentSource source, long capacityBytes, Allocation allocation) {
        return ReceiveVolumeRequest.newBuilder().setName(name).setSource(source).setCapacityBytes(capacityBytes).setAllocation(allocation).build();
    }

    ContentRelay.Agent agent(String node, ManagedChannel channel) {
        return new ContentRelay.Agent(node, NodeAgentGrpc.newStub(channel).withCallCredentials(token),
                NodeAgentGrpc.newBlockingStub(channel).withCallCredentials(token).withDeadlineAfter(30, TimeUnit.SECONDS));
    }

    /** Relays image {@code image} of {@code holder} into a new sparse image {@code name} on {@code target}, as controller-server would. */
    Volume copy(String holder, String image, String target, String name, long capacityBytes, AtomicLong progress) throws Exception {
        ManagedChannel from = channel(holder);
        ManagedChannel to = channel(target);
        try {
            ContentSource source = ContentSource.newBuilder().setVolume(image).build();
            return relay().copy(agent(holder, from), source, agent(target, to), receive(name, source, capacityBytes, Allocation.SPARSE), progress);
        } finally {
            from.shutdownNow();
            to.shutdownNow();
        }
    }

    /** A WriteContent stream of {@code stub}: its answer, or how it failed, completes {@code result}. */
    static StreamObserver<WriteContentRequest> writeContent(NodeAgentGrpc.NodeAgentStub stub, CompletableFuture<WriteContentResponse> result) {
        return stub.writeContent(answer(result));
    }

    /** The observer of a call's one answer: it, or how the call failed, completes {@code result}. */
    static <T> StreamObserver<T> answer(CompletableFuture<T> result) {
        return new StreamObserver<>() {
            @Override
            public void onNext(T response) {
                result.complete(response);
            }

            @Override
            public void onError(Throwable t) {
                result.completeExceptionally(t);
            }

            @Override
            public void onCompleted() {
            }
        };
    }

    static ContentRelay relay() {
        return new ContentRelay(new RelayMetrics(new PrometheusRegistry()), new Log(new PrintStream(new ByteArrayOutputStream(), true), 0));
    }
}
