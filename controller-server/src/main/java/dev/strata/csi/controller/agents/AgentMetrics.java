package dev.strata.csi.controller.agents;

import dev.strata.csi.metrics.Buckets;
import dev.strata.csi.metrics.StatusCodes;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall.SimpleForwardingClientCall;
import io.grpc.ForwardingClientCallListener.SimpleForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import java.time.Clock;
import java.time.Duration;

/**
 * The node agents as the controller sees them: how many are registered (live or with an expired
 * lease), how old each lease is, which do not answer calls, and how long the calls to each node's agent take and how they end.
 */
public final class AgentMetrics {

    private final Histogram calls;

    public AgentMetrics(PrometheusRegistry registry) {
        calls = Histogram.builder()
                .name("strata_agent_call_seconds")
                .help("Duration of the controller's calls to node agents, by node, method and gRPC status code")
                .labelNames("node", "method_name", "grpc_status_code")
                .classicOnly()
                .classicUpperBounds(Buckets.OPERATIONS)
                .register(registry);
    }

    /** Registers the gauges read from {@code agents} at each scrape. */
    public void watch(AgentDirectory agents, Clock clock, PrometheusRegistry registry) {
        GaugeWithCallback.builder()
                .name("strata_agents")
                .help("Node agents registered with this controller, by lease state (live, or expired: silent for three renewals)")
                .labelNames("state")
                .callback(callback -> {
                    long live = agents.live().size();
                    callback.call(live, "live");
                    callback.call(agents.registered().size() - live, "expired");
                })
                .register(registry);
        GaugeWithCallback.builder()
                .name("strata_agent_lease_age_seconds")
                .help("Time since each node's agent last renewed its registration")
                .labelNames("node")
                .callback(callback -> agents.registered().forEach(agent -> callback.call(
                        Duration.between(agent.renewed(), clock.instant()).toMillis() / 1e3, agent.nodeId())))
                .register(registry);
        GaugeWithCallback.builder()
                .name("strata_agent_unresponsive")
                .help("1 for each node whose agent let a call pass its deadline and has not answered a probe since: "
                        + "calls that need the node fail UNAVAILABLE")
                .labelNames("node")
                .callback(callback -> agents.notAnswering().forEach(nodeId -> callback.call(1, nodeId)))
                .register(registry);
    }

    /** Times the calls made through a stub to the agent of {@code nodeId}. */
    ClientInterceptor forNode(String nodeId) {
        return new ClientInterceptor() {
            @Override
            public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
                    MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
                String name = "/" + method.getFullMethodName();
                return new SimpleForwardingClientCall<>(next.newCall(method, options)) {
                    @Override
                    public void start(Listener<RespT> listener, Metadata headers) {
                        long start = System.nanoTime();
                        super.start(new SimpleForwardingClientCallListener<>(listener) {
                            @Override
                            public void onClose(Status status, Metadata trailers) {
                                calls.labelValues(nodeId, name, StatusCodes.goName(status.getCode()))
                                        .observe((System.nanoTime() - start) / 1e9);
                                super.onClose(status, trailers);
                            }
                        }, headers);
                    }
                };
            }
        };
    }
}
