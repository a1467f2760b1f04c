package dev.strata.csi.controller.agents;

import dev.strata.csi.agent.api.AgentRegistryGrpc;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.RegisterResponse;
import dev.strata.csi.auth.Caller;
import dev.strata.csi.log.Log;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.rpc.Rpc;
import io.grpc.stub.StreamObserver;
import java.net.URI;

/** Where node agents announce themselves, as the node they run on, and renew their lease. */
public final class AgentRegistryService extends AgentRegistryGrpc.AgentRegistryImplBase {

    private final AgentDirectory directory;
    private final NodeIdentities identities;
    private final ReportCheck reports;

    /** @param allowUnbound take tokens without a node claim (clusters before Kubernetes 1.30; see NodeIdentities) */
    public AgentRegistryService(AgentDirectory directory, boolean allowUnbound, Log log) {
        this.directory = directory;
        this.identities = new NodeIdentities(allowUnbound, log);
        this.reports = new ReportCheck(log);
    }

    @Override
    public void register(RegisterRequest request, StreamObserver<RegisterResponse> response) {
        Rpc.answer(response, () -> {
            if (request.getNodeId().isEmpty()) {
                throw CsiException.missing("node_id");
            }
            identities.requireMayRegister(request.getNodeId(), Caller.current());
            checkAddress(request.getAddress());
            boolean sendInventory = directory.register(reports.checked(request));
            return RegisterResponse.newBuilder().setRenewSeconds((int) directory.renewEvery().toSeconds())
                    .setSendInventory(sendInventory).build();
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
