package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.GetCapacityRequest;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Topology;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import dev.strata.csi.backend.KubernetesKeys;
import dev.strata.csi.backend.local.LocalParameters;
import dev.strata.csi.backend.nfs.NfsParameters;
import dev.strata.csi.e2e.SidecarMaps.Backend;
import dev.strata.csi.e2e.SidecarMaps.Provisioned;
import dev.strata.csi.e2e.SidecarMaps.SnapshotClass;
import dev.strata.csi.e2e.SidecarMaps.StorageClass;
import dev.strata.csi.testing.BoundExport;
import dev.strata.csi.testing.Programs;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The maps the sidecars and kubelet really send ({@link SidecarMaps}) through the CSI sockets of
 * controller-server and node-server running as processes, for both backends: each StorageClass
 * of the table is provisioned, attached, staged and published as Kubernetes would, and the
 * filesystem staged is the one the class names (mount table and blkid); a class with a misspelt
 * key is refused and nothing is made. The NFS export is a real directory; NFS mounts go to
 * {@link NoNfsClientMount} (this kernel has no NFS client), so for NFS the node calls are checked
 * to get as far as the mount, with the exact mount recorded.
 */
@Tag("root")
class SidecarRequestsTest {

    static final long MIB = 1 << 20;
    static final String NODE = "node-a";
    static final String TOPOLOGY_KEY = "topology.strata.csi.dev/node";

    @TempDir
    static Path dir;

    static Cluster cluster;
    static Path exportData;
    static Path mountLog;
    static int claims;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        BoundExport export = BoundExport.bind(dir, NfsTest.SERVER, NfsTest.SHARE);
        exportData = export.data();
        mountLog = dir.resolve("nfs-mounts.log");
        Path fakeBin = NoNfsClientMount.install(dir, mountLog);
        cluster = Cluster.start(dir, List.of("--agent-plaintext", "true"),
                List.of("--nfs-export-root", export.root().toString(), "--nfs-mount-exports", "false"),
                Map.of("PATH", fakeBin + ":" + System.getenv("PATH")), NODE);
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        SystemState.cleanUp(dir);
    }

    @AfterEach
    void nothingLeftBehind() throws Exception {
        List<String> leftovers = new java.util.ArrayList<>(SystemState.cleanUp(cluster.kubeletDir(NODE, "")));
        leftovers.addAll(SystemState.cleanUp(cluster.node(NODE).pool()));
        assertEquals(List.of(), leftovers, "the test left mounts or loop devices behind");
    }

    static List<StorageClass> storageClasses() {
        return SidecarMaps.STORAGE_CLASSES;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("storageClasses")
    void aClaimOfTheStorageClassGoesThroughEveryRequest(StorageClass storageClass) throws Exception {
        String claim = "claim-" + ++claims;
        String pvName = "pvc-" + UUID.randomUUID();
        VolumeCapability.AccessMode.Mode mode = storageClass.backend() == Backend.LOCAL
                ? VolumeCapability.AccessMode.Mode.SINGLE_NODE_MULTI_WRITER : VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER;
        Provisioned provisioned = SidecarMaps.provision(storageClass, claim, pvName, mode);
        CreateVolumeRequest create = CreateVolumeRequest.newBuilder().setName(pvName).putAllParameters(provisioned.parameters())
                .addVolumeCapabilities(provisioned.capability())
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(320 * MIB))
                .setAccessibilityRequirements(TopologyRequirement.newBuilder()
                        .addPreferred(Topology.newBuilder().putSegments(TOPOLOGY_KEY, NODE))
                        .addRequisite(Topology.newBuilder().putSegments(TOPOLOGY_KEY, NODE)))
                .build();
        if (storageClass.refusal().isPresent()) {
            StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> cluster.controller().createVolume(create));
            assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode(), e.getStatus().toString());
            assertTrue(e.getStatus().getDescription().contains(storageClass.refusal().get()), e.getStatus().getDescription());
            assertFalse(Files.exists(cluster.node(NODE).pool().resolve(pvName + ".img")), "no image made");
            assertFalse(Files.exists(exportData.resolve(pvName)), "no directory made");
            assertFalse(Files.exists(exportData.resolve(SidecarMaps.NAMESPACE + "/" + claim)), "no directory made");
            return;
        }
        // The provisioner's capacity tracking asks with the class's parameters as they are, prefixed keys and all.
        assertTrue(cluster.controller().getCapacity(GetCapacityRequest.newBuilder().putAllParameters(storageClass.parameters())
                .build()).getAvailableCapacity() > 0);
        Volume volume = cluster.controller().createVolume(create).getVolume();
        Map<String, String> attributes = SidecarMaps.volumeAttributes(volume);
        if (storageClass.backend() == Backend.LOCAL) {
            pipelineOfALocalVolume(storageClass, volume, provisioned.capability(), attributes);
        } else {
            pipelineOfAnNfsVolume(storageClass, volume, claim, provisioned.capability(), attributes);
        }
        DeleteVolumeRequest delete = DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build();
        cluster.controller().deleteVolume(delete);
        assertFalse(Files.exists(cluster.node(NODE).pool().resolve(pvName + ".img")), "image freed");
    }

    private static void pipelineOfALocalVolume(StorageClass storageClass, Volume volume, VolumeCapability capability,
            Map<String, String> attributes) throws Exception {
        String device = cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId(NODE).setVolumeCapability(capability)
                .putAllVolumeContext(attributes).build()).getPublishContextMap().get("devicePath");
        Path staging = cluster.kubeletDir(NODE, "staging-" + volume.getVolumeId().replace('/', '-'));
        var node = cluster.node(NODE).node();
        node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setVolumeCapability(capability)
                .putPublishContext("devicePath", device).putAllVolumeContext(attributes).build());
        Path target = cluster.kubeletDir(NODE, "pod-" + volume.getVolumeId().replace('/', '-')).resolve(capability.hasBlock() ? "dev" : "mount");
        node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).setTargetPath(target.toString()).setVolumeCapability(capability)
                .putPublishContext("devicePath", device)
                .putAllVolumeContext(SidecarMaps.publishContext(attributes, "app-0", UUID.randomUUID().toString())).build());
        if (storageClass.staged().isPresent()) {
            String fsType = storageClass.staged().get();
            assertEquals(fsType, SystemState.mountAt(staging).orElseThrow().fsType(), "the filesystem mounted at the staging path");
            assertEquals(fsType, Programs.run("blkid", "-p", "-o", "value", "-s", "TYPE", device).strip(),
                    "the filesystem on the device (probed, not blkid's cache)");
            assertEquals(fsType, SystemState.mountAt(target).orElseThrow().fsType(), "the filesystem published to the pod");
        } else {
            assertTrue(SystemState.mountAt(staging).isEmpty(), "a block volume is not mounted at the staging path");
            assertTrue(SystemState.mountAt(target).isPresent(), "the device is bind-mounted onto the target file");
            assertEquals("", Programs.execute("blkid", "-p", "-o", "value", "-s", "TYPE", device).output().strip(),
                    "no filesystem made on a block volume, whatever the class's fsType");
        }
        node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setTargetPath(target.toString()).build());
        node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId())
                .setStagingTargetPath(staging.toString()).build());
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId(NODE).build());
    }

    private static void pipelineOfAnNfsVolume(StorageClass storageClass, Volume volume, String claim, VolumeCapability capability,
            Map<String, String> attributes) throws Exception {
        String subDir = volume.getVolumeContextMap().get("subDir");
        assertTrue(Files.isDirectory(exportData.resolve(subDir)), "CreateVolume made the directory " + subDir);
        if (storageClass.parameters().containsKey("subDir")) {
            assertEquals(SidecarMaps.NAMESPACE + "/" + claim, subDir, "the template filled from the provisioner's metadata");
        }
        cluster.controller().controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId(NODE).setVolumeCapability(capability)
                .putAllVolumeContext(attributes).build());
        Path staging = cluster.kubeletDir(NODE, "nfs-staging-" + claim);
        var node = cluster.node(NODE).node();
        Files.deleteIfExists(mountLog);
        StatusRuntimeException stage = assertThrows(StatusRuntimeException.class, () -> node.nodeStageVolume(
                NodeStageVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString())
                        .setVolumeCapability(capability).putAllVolumeContext(attributes).build()));
        assertTrue(stage.getStatus().getDescription().contains("no NFS client"), "NodeStageVolume got as far as the mount: " + stage.getStatus());
        String options = String.join(",", capability.getMount().getMountFlagsList());
        assertEquals(List.of("-t nfs " + (options.isEmpty() ? "" : "-o " + options + " ") + "-- " + NfsTest.SERVER + ":"
                + NfsTest.SHARE + "/" + subDir + " " + staging), Files.readAllLines(mountLog));
        // Nothing is staged (no NFS client): NodePublishVolume gets past the volume_context to that.
        StatusRuntimeException publish = assertThrows(StatusRuntimeException.class, () -> node.nodePublishVolume(
                NodePublishVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).setStagingTargetPath(staging.toString())
                        .setTargetPath(cluster.kubeletDir(NODE, "nfs-pod-" + claim).resolve("mount").toString())
                        .setVolumeCapability(capability)
                        .putAllVolumeContext(SidecarMaps.publishContext(attributes, "app-0", UUID.randomUUID().toString())).build()));
        assertEquals(Status.Code.FAILED_PRECONDITION, publish.getStatus().getCode(), publish.getStatus().toString());
        cluster.controller().controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(volume.getVolumeId()).setNodeId(NODE).build());
        cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        assertFalse(Files.exists(exportData.resolve(subDir)), "DeleteVolume removed the directory");
    }

    @Test
    void aMisspeltKeyInAVolumeContextIsRefusedBeforeAnythingIsMounted() throws Exception {
        Path staging = cluster.kubeletDir(NODE, "static-staging");
        VolumeCapability capability = VolumeCapability.newBuilder().setMount(VolumeCapability.MountVolume.getDefaultInstance())
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER))
                .build();
        Files.deleteIfExists(mountLog);
        // A static PersistentVolume written by hand: subDir misspelt would have mounted the whole share.
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> cluster.node(NODE).node().nodeStageVolume(
                NodeStageVolumeRequest.newBuilder().setVolumeId("hand-written-pv").setStagingTargetPath(staging.toString())
                        .setVolumeCapability(capability).putAllVolumeContext(SidecarMaps.NFS_EXPORT).putVolumeContext("subdir", "data")
                        .build()));
        assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode(), e.getStatus().toString());
        assertTrue(e.getStatus().getDescription().startsWith("unknown volume_context key 'subdir' for an NFS volume (did you mean subDir?); "
                + "an administrator may set: mountPermissions, server, share, subDir;"), e.getStatus().getDescription());
        assertFalse(Files.exists(mountLog), "nothing was mounted");
        assertTrue(SystemState.mountAt(staging).isEmpty());
    }

    static List<SnapshotClass> snapshotClasses() {
        return SidecarMaps.SNAPSHOT_CLASSES;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("snapshotClasses")
    void aSnapshotOfTheClassIsTakenOrRefused(SnapshotClass snapshotClass) throws Exception {
        for (Backend backend : Backend.values()) {
            StorageClass storageClass = SidecarMaps.STORAGE_CLASSES.stream()
                    .filter(candidate -> candidate.backend() == backend && candidate.refusal().isEmpty() && !candidate.block())
                    .findFirst().orElseThrow();
            String pvName = "pvc-" + UUID.randomUUID();
            Provisioned provisioned = SidecarMaps.provision(storageClass, "claim-" + ++claims, pvName, backend == Backend.LOCAL
                    ? VolumeCapability.AccessMode.Mode.SINGLE_NODE_MULTI_WRITER : VolumeCapability.AccessMode.Mode.MULTI_NODE_MULTI_WRITER);
            Volume volume = cluster.controller().createVolume(CreateVolumeRequest.newBuilder().setName(pvName)
                    .putAllParameters(provisioned.parameters()).addVolumeCapabilities(provisioned.capability())
                    .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(16 * MIB))
                    .setAccessibilityRequirements(TopologyRequirement.newBuilder()
                            .addPreferred(Topology.newBuilder().putSegments(TOPOLOGY_KEY, NODE)))
                    .build()).getVolume();
            String name = "snapshot-" + UUID.randomUUID();
            CreateSnapshotRequest request = CreateSnapshotRequest.newBuilder().setName(name).setSourceVolumeId(volume.getVolumeId())
                    .putAllParameters(SidecarMaps.snapshotParameters(snapshotClass, "nightly", "snapcontent-" + UUID.randomUUID()))
                    .build();
            if (snapshotClass.refusal().isPresent()) {
                StatusRuntimeException e = assertThrows(StatusRuntimeException.class, () -> cluster.controller().createSnapshot(request));
                assertEquals(Status.Code.INVALID_ARGUMENT, e.getStatus().getCode(), backend + ": " + e.getStatus());
                assertTrue(e.getStatus().getDescription().contains(snapshotClass.refusal().get()), e.getStatus().getDescription());
                assertTrue(snapshotsNamed(name).isEmpty(), backend + ": no snapshot taken");
            } else {
                Snapshot snapshot = cluster.controller().createSnapshot(request).getSnapshot();
                assertTrue(snapshot.getReadyToUse());
                assertEquals(List.of(snapshot.getSnapshotId()), snapshotsNamed(name), backend + ": the snapshot is listed");
                cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(snapshot.getSnapshotId()).build());
            }
            cluster.controller().deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.getVolumeId()).build());
        }
    }

    private static List<String> snapshotsNamed(String name) {
        return cluster.controller().listSnapshots(ListSnapshotsRequest.getDefaultInstance()).getEntriesList().stream()
                .map(entry -> entry.getSnapshot().getSnapshotId()).filter(id -> id.endsWith("/" + name)).toList();
    }

    /** Every key the stand-ins add on their own is in the driver's one list of what Kubernetes sends, and is accepted as such. */
    @Test
    void everyKeyTheSidecarsAddIsInTheDriversList() {
        Set<String> added = new TreeSet<>();
        for (StorageClass storageClass : SidecarMaps.STORAGE_CLASSES.stream().filter(row -> row.refusal().isEmpty()).toList()) {
            SidecarMaps.provision(storageClass, "claim", "pvc-x", VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER).parameters()
                    .keySet().stream()
                    .filter(key -> !LocalParameters.STORAGE_CLASS.administrator().contains(key)
                            && !NfsParameters.STORAGE_CLASS.administrator().contains(key))
                    .forEach(key -> added.add(key.equalsIgnoreCase("fstype") ? "fsType" : key));
        }
        assertTrue(added.stream().allMatch(KubernetesKeys.Request.CREATE_VOLUME::fromKubernetes), added.toString());
        assertTrue(added.containsAll(Set.of("fsType", "csiNodeStageSecretName", "csi.storage.k8s.io/pvc/name")), added.toString());
        Set<String> context = new TreeSet<>(SidecarMaps.publishContext(SidecarMaps.volumeAttributes(Volume.getDefaultInstance()), "p", "u")
                .keySet());
        assertTrue(context.stream().allMatch(KubernetesKeys.Request.VOLUME_CONTEXT::fromKubernetes), context.toString());
        Set<String> snapshot = new TreeSet<>(SidecarMaps.snapshotParameters(SidecarMaps.SNAPSHOT_CLASSES.get(2), "s", "c").keySet());
        assertEquals(Set.of("csi.storage.k8s.io/volumesnapshot/name", "csi.storage.k8s.io/volumesnapshot/namespace",
                "csi.storage.k8s.io/volumesnapshotcontent/name"), snapshot);
        assertTrue(snapshot.stream().allMatch(KubernetesKeys.Request.CREATE_SNAPSHOT::fromKubernetes), snapshot.toString());
    }

    /** The table holds only classes the real provisioner takes; what it refuses itself never reaches a driver. */
    @Test
    void theStandInProvisionerRefusesWhatTheRealOneRefuses() {
        VolumeCapability.AccessMode.Mode mode = VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER;
        SidecarMaps.STORAGE_CLASSES.forEach(storageClass -> SidecarMaps.provision(storageClass, "claim", "pvc-x", mode));
        assertThrows(IllegalArgumentException.class, () -> SidecarMaps.provision(StorageClass.staged("both", Backend.LOCAL,
                Map.of("fsType", "xfs", "csi.storage.k8s.io/fstype", "xfs"), "xfs"), "c", "p", mode));
        assertThrows(IllegalArgumentException.class, () -> SidecarMaps.provision(StorageClass.staged("typo", Backend.LOCAL,
                Map.of("csi.storage.k8s.io/fsType", "xfs"), "xfs"), "c", "p", mode));
        Provisioned provisioned = SidecarMaps.provision(SidecarMaps.STORAGE_CLASSES.get(3), "claim", "pvc-x", mode);
        assertEquals(Map.of("FSType", "btrfs", "csiNodeStageSecretName", "strata", "csiNodeStageSecretNamespace", "kube-system",
                "csi.storage.k8s.io/pvc/name", "claim", "csi.storage.k8s.io/pvc/namespace", SidecarMaps.NAMESPACE,
                "csi.storage.k8s.io/pv/name", "pvc-x"), provisioned.parameters(), "prefixed secret references taken out, the rest passed");
        assertEquals("btrfs", provisioned.capability().getMount().getFsType());
    }
}
