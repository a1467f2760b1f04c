import com.google.protobuf.Message;
import com.google.protobuf.TextFormat;
import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerExpandVolumeRequest;
import csi.v1.Csi.ControllerPublishVolumeResponse;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.CreateVolumeResponse;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.GetPluginInfoRequest;
import csi.v1.Csi.NodeGetInfoRequest;
import csi.v1.Csi.NodeExpandVolumeRequest;
import csi.v1.Csi.NodeGetVolumeStatsRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.VolumeCapability;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * The main job on an embedded default: controller-server and two node-servers started as local
 * processes, one volume driven through create -> attach -> stage -> publish, a file written and
 * read back through the pod's target path, the volume grown while in use, then every phase undone, each with its latency, and a
 * check that no image, loop device or mount is left. Run through hack/demo.sh, as root.
 */
public final class Demo {

    public static void main(String[] args) throws Exception {
        try (LocalCluster cluster = LocalCluster.start(Path.of(args[0]), "node-a", "node-b")) {
            System.exit(run(cluster) ? 0 : 1);
        }
    }

    private static boolean run(LocalCluster cluster) throws Exception {
        var controller = cluster.controller();
        var node = cluster.node("node-b");
        System.out.printf("work directory %s: controller-server and node-servers node-a, node-b are up%n%n", cluster.work);

        System.out.println("Identity and registration (node-driver-registrar, external-provisioner):");
        step("GetPluginInfo", () -> cluster.identity().getPluginInfo(GetPluginInfoRequest.getDefaultInstance()));
        step("NodeGetInfo (node-b)", () -> node.nodeGetInfo(NodeGetInfoRequest.getDefaultInstance()));
        step("GetCapacity (node-b)", () -> controller.getCapacity(
                GetCapacityRequest.newBuilder().setAccessibleTopology(LocalCluster.on("node-b")).build()));

        // xfs: its online growth needs only CAP_SYS_ADMIN (ext4's also needs CAP_SYS_RESOURCE, which some sandboxes withhold).
        VolumeCapability capability = LocalCluster.mount("xfs");
        Path staging = Files.createDirectories(cluster.work.resolve("node-b/kubelet/plugins/globalmount"));
        Path target = Files.createDirectories(cluster.work.resolve("node-b/kubelet/pods/uid-1/volumes")).resolve("mount");

        System.out.println("\nThe pipeline, as the sidecars and kubelet drive it:");
        String id = ((CreateVolumeResponse) step("CreateVolume (create)", () -> controller.createVolume(
                CreateVolumeRequest.newBuilder().setName("pvc-demo")
                        .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(320L << 20))
                        .addVolumeCapabilities(capability)
                        .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(LocalCluster.on("node-b"))
                                .addRequisite(LocalCluster.on("node-a")).addRequisite(LocalCluster.on("node-b")))
                        .build()))).getVolume().getVolumeId();
        var publishContext = ((ControllerPublishVolumeResponse) step("ControllerPublishVolume (attach)",
                () -> controller.controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                        .setVolumeId(id).setNodeId("node-b").setVolumeCapability(capability).build()))).getPublishContextMap();
        step("NodeStageVolume (stage)", () -> node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(id)
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).putAllPublishContext(publishContext).build()));
        step("NodePublishVolume (publish)", () -> node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(id)
                .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability).build()));

        String text = "hello from the pod, " + java.time.Instant.now();
        Files.writeString(target.resolve("hello.txt"), text);
        String back = Files.readString(target.resolve("hello.txt"));
        System.out.printf("  %-34s %s%n", "write + read through target path", back.equals(text) ? "ok: \"" + back + "\"" : "MISMATCH");
        step("NodeGetVolumeStats", () -> node.nodeGetVolumeStats(NodeGetVolumeStatsRequest.newBuilder()
                .setVolumeId(id).setVolumePath(target.toString()).build()));

        System.out.println("\nThe claim grows from 320 to 384 MiB (external-resizer, then kubelet), while the pod uses it:");
        step("ControllerExpandVolume (resize)", () -> controller.controllerExpandVolume(ControllerExpandVolumeRequest.newBuilder()
                .setVolumeId(id).setVolumeCapability(capability).setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(384L << 20))
                .build()));
        step("NodeExpandVolume (resize)", () -> node.nodeExpandVolume(NodeExpandVolumeRequest.newBuilder()
                .setVolumeId(id).setVolumePath(target.toString()).setStagingTargetPath(staging.toString())
                .setVolumeCapability(capability).setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(384L << 20)).build()));
        System.out.printf("  %-34s %s%n", "read through target path", Files.readString(target.resolve("hello.txt")).equals(text)
                ? "ok: the file written before" : "MISMATCH");
        step("NodeGetVolumeStats", () -> node.nodeGetVolumeStats(NodeGetVolumeStatsRequest.newBuilder()
                .setVolumeId(id).setVolumePath(target.toString()).build()));

        System.out.println("\nAnd back:");
        step("NodeUnpublishVolume", () -> node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder()
                .setVolumeId(id).setTargetPath(target.toString()).build()));
        step("NodeUnstageVolume", () -> node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder()
                .setVolumeId(id).setStagingTargetPath(staging.toString()).build()));
        step("ControllerUnpublishVolume (detach)", () -> controller.controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(id).setNodeId("node-b").build()));
        step("DeleteVolume", () -> controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(id).build()));

        List<String> left = cluster.stopAndListLeftovers();
        System.out.printf("%nleft behind (images, loop devices, mounts, sockets): %s%n", left.isEmpty() ? "nothing" : left);
        System.out.println("server logs: " + cluster.work + "/*.log");
        return back.equals(text) && left.isEmpty();
    }

    private static Message step(String rpc, Callable<? extends Message> call) throws Exception {
        long start = System.nanoTime();
        Message reply = call.call();
        double millis = (System.nanoTime() - start) / 1e6;
        String shown = TextFormat.printer().shortDebugString(reply);
        System.out.printf("  %-34s %8.2f ms  %s%n", rpc, millis, shown.isEmpty() ? "(empty)" : shown);
        return reply;
    }
}
