package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A real NFS mount through node-server: stage, publish, write, read back, and undo. It needs a
 * kernel with an NFS client and an export to write to, given as STRATA_NFS_TEST_EXPORT=server:/share;
 * elsewhere (these build machines have no NFS client) it is reported as skipped, never as passed.
 */
@Tag("root")
class NfsRealMountTest {

    @TempDir
    Path dir;

    @Test
    void stagesPublishesAndUndoesARealShare() throws Exception {
        boolean kernelHasNfs = Files.readString(Path.of("/proc/filesystems")).lines().anyMatch(line -> line.trim().equals("nfs")
                || line.trim().endsWith("\tnfs") || line.trim().endsWith("\tnfs4"));
        String export = System.getenv().getOrDefault("STRATA_NFS_TEST_EXPORT", "");
        Assumptions.assumeTrue(kernelHasNfs, "SKIPPED: this kernel has no NFS client (/proc/filesystems lists no nfs)");
        Assumptions.assumeTrue(export.contains(":/"), "SKIPPED: set STRATA_NFS_TEST_EXPORT=server:/share to run a real NFS mount");
        Root.require();
        String server = export.substring(0, export.indexOf(":/"));
        String share = export.substring(export.indexOf(":/") + 1);
        try (Cluster cluster = Cluster.start(dir, "node-a")) {
            var node = cluster.node("node-a").node();
            Path staging = cluster.kubeletDir("node-a", "staging");
            Path target = cluster.kubeletDir("node-a", "pod").resolve("mount");
            VolumeCapability capability = VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                    .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER))
                    .build();
            Map<String, String> context = Map.of("server", server, "share", share);
            node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId("real-nfs").setStagingTargetPath(staging.toString())
                    .setVolumeCapability(capability).putAllVolumeContext(context).build());
            assertTrue(SystemState.mountAt(staging).orElseThrow().fsType().startsWith("nfs"));
            node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId("real-nfs").setStagingTargetPath(staging.toString())
                    .setTargetPath(target.toString()).setVolumeCapability(capability).putAllVolumeContext(context).build());
            String name = "strata-test-" + UUID.randomUUID();
            Files.writeString(target.resolve(name), "through NFS");
            assertEquals("through NFS", Files.readString(staging.resolve(name)));
            Files.delete(target.resolve(name));
            node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId("real-nfs").setTargetPath(target.toString()).build());
            node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId("real-nfs").setStagingTargetPath(staging.toString()).build());
            assertEquals(List.of(), SystemState.mountsUnder(dir));
        } finally {
            SystemState.cleanUp(dir);
        }
    }
}
