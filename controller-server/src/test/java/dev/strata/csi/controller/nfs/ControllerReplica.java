package dev.strata.csi.controller.nfs;

import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.MountTable;
import dev.strata.csi.system.Crashes;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;

/**
 * A second controller process for {@link NfsControllerQuotaTest}: an NfsController of its own
 * (the quota system calls a recording stand-in, as in that test) on the export the test made,
 * described as xfs with project quotas. It says "ready", waits for the go file, then creates the
 * volume {@code pvc-shared} that its twin creates too, and then {@code count} volumes of its own.
 * Arguments: export root, export directory, name prefix, count, go file.
 */
public final class ControllerReplica {

    private ControllerReplica() {}

    public static void main(String[] args) throws Exception {
        Path root = Path.of(args[0]);
        Path export = Path.of(args[1]);
        String prefix = args[2];
        int count = Integer.parseInt(args[3]);
        Path go = Path.of(args[4]);
        String mountinfo = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
                + "40 22 7:3 / " + export + " rw,relatime shared:30 - xfs /dev/loop3 rw,attr2,inode64,prjquota\n";
        Log log = new Log(System.out, 0);
        NfsController controller = new NfsController(new Exports(root, false, null,
                new NfsExportMetrics(new io.prometheus.metrics.model.registry.PrometheusRegistry()), new Kernel(), log, () -> MountTable.parse(mountinfo)),
                new InMemoryProjectQuotas(), Duration.ofSeconds(30), Clock.systemUTC(), Crashes.none(), log);
        System.out.println("ready");
        while (!Files.exists(go)) {
            Thread.sleep(1);
        }
        create(controller, "pvc-shared");
        for (int i = 0; i < count; i++) {
            create(controller, "pvc-" + prefix + "-" + i);
        }
        System.out.println("done");
        System.exit(0);
    }

    private static void create(NfsController controller, String name) throws Exception {
        controller.create(controller.check(CreateVolumeRequest.newBuilder().setName(name)
                .putParameters("server", "nfs.example").putParameters("share", "/srv/share")
                .setCapacityRange(csi.v1.Csi.CapacityRange.newBuilder().setRequiredBytes(1 << 20))
                .addVolumeCapabilities(VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                        .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER)))
                .build()));
    }
}
