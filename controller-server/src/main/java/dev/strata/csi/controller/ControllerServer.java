package dev.strata.csi.controller;

import csi.v1.Csi.PluginCapability;
import dev.strata.csi.identity.IdentityService;
import dev.strata.csi.server.DriverProgram;
import java.util.List;

/** The controller-server program: CSI Identity and Controller services, run as a Deployment. */
public final class ControllerServer {

    private ControllerServer() {}

    public static void main(String[] args) {
        DriverProgram program = new DriverProgram("controller-server",
                "Serves the CSI Controller service beside external-provisioner and external-attacher.",
                List.of(),
                context -> List.of(
                        new IdentityService(context.plugin(),
                                List.of(IdentityService.service(PluginCapability.Service.Type.CONTROLLER_SERVICE)),
                                () -> true),
                        new ControllerService()));
        System.exit(program.run(args, System.getenv(), System.out, System.err));
    }
}
