package dev.strata.csi.node;

import csi.v1.Csi.NodeGetCapabilitiesRequest;
import csi.v1.Csi.NodeGetCapabilitiesResponse;
import csi.v1.Csi.NodeGetInfoRequest;
import csi.v1.Csi.NodeGetInfoResponse;
import csi.v1.NodeGrpc;
import io.grpc.stub.StreamObserver;

/**
 * The CSI Node service. It advertises exactly the capabilities that work; RPCs not implemented
 * answer UNIMPLEMENTED.
 */
public final class NodeService extends NodeGrpc.NodeImplBase {

    private final String nodeId;

    public NodeService(String nodeId) {
        this.nodeId = nodeId;
    }

    @Override
    public void nodeGetInfo(NodeGetInfoRequest request, StreamObserver<NodeGetInfoResponse> response) {
        response.onNext(NodeGetInfoResponse.newBuilder().setNodeId(nodeId).build());
        response.onCompleted();
    }

    @Override
    public void nodeGetCapabilities(NodeGetCapabilitiesRequest request,
            StreamObserver<NodeGetCapabilitiesResponse> response) {
        response.onNext(NodeGetCapabilitiesResponse.getDefaultInstance());
        response.onCompleted();
    }
}
