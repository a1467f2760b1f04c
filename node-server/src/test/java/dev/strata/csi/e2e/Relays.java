package dev.strata.csi.e2e;

import dev.strata.csi.agent.api.NodeAgentGrpc;
import dev.strata.csi.auth.AgentToken;
import dev.strata.csi.backend.local.ContentRelay;
import dev.strata.csi.backend.local.RelayMetrics;
import dev.strata.csi.log.Log;
import io.grpc.CallCredentials;
import io.grpc.ManagedChannel;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.util.concurrent.TimeUnit;

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

    ContentRelay.Agent agent(String node, ManagedChannel channel) {
        return new ContentRelay.Agent(node, NodeAgentGrpc.newStub(channel).withCallCredentials(token),
                NodeAgentGrpc.newBlockingStub(channel).withCallCredentials(token).withDeadlineAfter(30, TimeUnit.SECONDS));
    }

    static ContentRelay relay() {
        return new ContentRelay(new RelayMetrics(new PrometheusRegistry()), new Log(new PrintStream(new ByteArrayOutputStream(), true), 0));
    }
}
