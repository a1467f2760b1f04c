package dev.strata.csi.deploy;

import csi.v1.ControllerGrpc;
import csi.v1.Csi.ControllerGetCapabilitiesRequest;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * What controller-server advertises in ControllerGetCapabilities, asked of the real program on a
 * socket of its own: the sidecars of the controller pod must match it (a csi-snapshotter beside a
 * driver without CREATE_DELETE_SNAPSHOT exits; snapshots advertised without it are never taken).
 */
final class ControllerCapabilities {

    private ControllerCapabilities() {}

    static Set<String> advertised(Path dir) throws Exception {
        return ControllerProgram.ask(dir, channel -> {
            Set<String> types = new LinkedHashSet<>();
            ControllerGrpc.newBlockingStub(channel).controllerGetCapabilities(ControllerGetCapabilitiesRequest.getDefaultInstance())
                    .getCapabilitiesList().forEach(capability -> types.add(capability.getRpc().getType().name()));
            return types;
        });
    }
}
