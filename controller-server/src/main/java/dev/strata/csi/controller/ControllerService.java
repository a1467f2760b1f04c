package dev.strata.csi.controller;

import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import csi.v1.Csi.ControllerGetCapabilitiesResponse;
import io.grpc.stub.StreamObserver;

/**
 * The CSI Controller service. It advertises exactly the capabilities that work; RPCs not
 * implemented answer UNIMPLEMENTED, which the sidecars and csi-sanity understand.
 */
public final class ControllerService extends ControllerGrpc.ControllerImplBase {

    @Override
    public void controllerGetCapabilities(ControllerGetCapabilitiesRequest request,
            StreamObserver<ControllerGetCapabilitiesResponse> response) {
        response.onNext(ControllerGetCapabilitiesResponse.getDefaultInstance());
        response.onCompleted();
    }
}
