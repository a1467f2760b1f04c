package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.testing.Programs;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/** What the encryption tests (EncryptionTest, EncryptedLvmTest) share: the check for dm-crypt, and a volume taken through the node's calls. */
final class EncryptedVolumes {

    private EncryptedVolumes() {
    }

    /** Skips the test without device-mapper or cryptsetup, or fails it with STRATA_TEST_LUKS=required (hack/luks-vm.sh). */
    static void requireDmCrypt() throws Exception {
        boolean deviceMapper = Files.readString(Path.of("/proc/misc")).lines().anyMatch(line -> line.endsWith(" device-mapper"));
        boolean cryptsetup = Programs.execute("cryptsetup", "--version").status() == 0;
        if ("required".equals(System.getenv("STRATA_TEST_LUKS"))) {
            assertTrue(deviceMapper && cryptsetup, "STRATA_TEST_LUKS=required, but device-mapper or cryptsetup is missing");
        }
        Assumptions.assumeTrue(deviceMapper && cryptsetup, "no device-mapper or cryptsetup here (hack/luks-vm.sh runs this test in a VM)");
    }

    /** The open mappings whose name is the volume's (/sys/block/dm-N/dm/name). */
    static List<String> mappings(String volume) throws IOException {
        try (Stream<Path> devices = Files.list(Path.of("/sys/block"))) {
            return devices.filter(d -> d.getFileName().toString().startsWith("dm-"))
                    .map(d -> d.resolve("dm/name"))
                    .map(file -> {
                        try {
                            return Files.readString(file).strip();
                        } catch (IOException e) {
                            return "";
                        }
                    })
                    .filter(name -> name.equals("strata-" + volume))
                    .toList();
        }
    }

    static Status.Code code(Runnable call) {
        return Assertions.assertThrows(StatusRuntimeException.class, call::run).getStatus().getCode();
    }

    /** A volume attached to {@code node} (its device as the publish context names it), and its staging and target paths there. */
    record Staged(Cluster cluster, String node, Volume volume, VolumeCapability capability, Path device, Path staging, Path target) {

        static Staged attach(Cluster cluster, String node, Volume volume, VolumeCapability capability) throws Exception {
            // Asked again while ABORTED, as external-attacher does: a restored volume's copy may still be finishing.
            String device = SidecarRetry.untilDone(java.time.Duration.ofMinutes(5), () -> cluster.controller().controllerPublishVolume(
                    ControllerPublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setNodeId(node)
                            .setVolumeCapability(capability).build()))
                    .getPublishContextMap().getOrDefault("devicePath", "");
            String name = volume.getVolumeId().substring(volume.getVolumeId().lastIndexOf('/') + 1);
            return new Staged(cluster, node, volume, capability, Path.of(device), cluster.stagingPath(node, name),
                    cluster.mountTarget(node, name));
        }

        String name() {
            return volume.getVolumeId().substring(volume.getVolumeId().lastIndexOf('/') + 1);
        }

        void stage(Map<String, String> secrets) {
            cluster.node(node).node().nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setVolumeCapability(capability).putAllSecrets(secrets).build());
        }

        void publish() {
            cluster.node(node).node().nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                    .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability).build());
        }

        /** Unpublished and unstaged. */
        void unstage() {
            cluster.node(node).node().nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setTargetPath(target.toString()).build());
            cluster.node(node).node().nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString()).build());
        }

        void detachDelete() {
            cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                    .setVolumeId(volume.getVolumeId()).setNodeId(node).build());
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        }
    }
}
