package dev.strata.csi.controller.agents;

import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.RegisterResponse;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import io.grpc.stub.StreamObserver;
import java.net.URI;

/** Where node agents announce themselves and renew their lease. */
public final class AgentRegistryService extends AgentRegistryGrpc.AgentRegistryImplBase {

    private final AgentDirectory directory;

    public AgentRegistryService(AgentDirectory directory) {
        this.directory = directory;
    }

    @Override
    public void register(RegisterRequest request, StreamObserver<RegisterResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getNodeId().isEmpty()) {
                throw CsiException.missing("node_id");
            }
            checkAddress(request.getAddress());
            directory.register(request);
            return RegisterResponse.newBuilder().setRenewSeconds((int) directory.renewEvery().toSeconds()).build();
        });
    }

    private static void checkAddress(String address) {
        try {
            URI uri = new URI("tcp://" + address);
            if (uri.getHost() == null || uri.getPort() <= 0 || !address.equals(uri.getAuthority())) {
                throw CsiException.invalidArgument("agent address must be host:port, got " + CsiException.printable(address));
            }
        } catch (java.net.URISyntaxException e) {
            throw CsiException.invalidArgument("agent address must be host:port, got " + CsiException.printable(address));
        }
    }
}
