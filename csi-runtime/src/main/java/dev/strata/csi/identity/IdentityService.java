package dev.strata.csi.identity;

import com.google.protobuf.BoolValue;
import csi.v1.Csi.GetPluginCapabilitiesRequest;
import csi.v1.Csi.GetPluginCapabilitiesResponse;
import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.GetPluginInfoResponse;
import csi.v1.Csi.PluginCapability;
import csi.v1.Csi.ProbeRequest;
import csi.v1.Csi.ProbeResponse;
import csi.v1.IdentityGrpc;
import io.grpc.stub.StreamObserver;
import java.util.List;
import java.util.function.BooleanSupplier;

/** The CSI Identity service: who the plugin is, what it offers, and whether it is ready. */
public final class IdentityService extends IdentityGrpc.IdentityImplBase {

    /**
     * What the plugin as a whole offers, reported alike by both servers (csi-sanity and the CSI
     * spec read them per plugin): the Controller service (served by controller-server) and
     * topology constraints (volumes are reachable from one node only), and online expansion
     * (volumes grow while in use).
     */
    public static final List<PluginCapability> DRIVER_CAPABILITIES = List.of(
            service(PluginCapability.Service.Type.CONTROLLER_SERVICE),
            service(PluginCapability.Service.Type.GROUP_CONTROLLER_SERVICE),
            service(PluginCapability.Service.Type.VOLUME_ACCESSIBILITY_CONSTRAINTS),
            PluginCapability.newBuilder().setVolumeExpansion(PluginCapability.VolumeExpansion.newBuilder()
                    .setType(PluginCapability.VolumeExpansion.Type.ONLINE)).build());

    /**
     * What controller-server advertises: the driver's capabilities and the SnapshotMetadata
     * service, which it serves (external-snapshot-metadata asks its socket for it); node-server
     * does not serve it.
     */
    public static final List<PluginCapability> CONTROLLER_CAPABILITIES = java.util.stream.Stream.concat(DRIVER_CAPABILITIES.stream(),
            java.util.stream.Stream.of(service(PluginCapability.Service.Type.SNAPSHOT_METADATA_SERVICE))).toList();

    private final PluginInfo info;
    private final List<PluginCapability> capabilities;
    private final BooleanSupplier ready;

    /**
     * @param ready answers Probe; false while the server cannot yet serve its purpose (the CO
     *              then waits instead of sending calls that would fail)
     */
    public IdentityService(PluginInfo info, List<PluginCapability> capabilities, BooleanSupplier ready) {
        this.info = info;
        this.capabilities = List.copyOf(capabilities);
        this.ready = ready;
    }

    @Override
    public void getPluginInfo(GetPluginInfoRequest request, StreamObserver<GetPluginInfoResponse> response) {
        response.onNext(GetPluginInfoResponse.newBuilder()
                .setName(info.name())
                .setVendorVersion(info.version())
                .build());
        response.onCompleted();
    }

    @Override
    public void getPluginCapabilities(
            GetPluginCapabilitiesRequest request, StreamObserver<GetPluginCapabilitiesResponse> response) {
        response.onNext(GetPluginCapabilitiesResponse.newBuilder().addAllCapabilities(capabilities).build());
        response.onCompleted();
    }

    @Override
    public void probe(ProbeRequest request, StreamObserver<ProbeResponse> response) {
        response.onNext(ProbeResponse.newBuilder()
                .setReady(BoolValue.newBuilder().setValue(ready.getAsBoolean()))
                .build());
        response.onCompleted();
    }

    /** A plugin capability naming one service. */
    public static PluginCapability service(PluginCapability.Service.Type type) {
        return PluginCapability.newBuilder()
                .setService(PluginCapability.Service.newBuilder().setType(type))
                .build();
    }
}
