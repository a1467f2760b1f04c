package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static dev.strata.csi.e2e.PipelineTest.mount;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeGroupSnapshotRequest;
import csi.v1.Csi.DeleteVolumeGroupSnapshotRequest;
import csi.v1.Csi.GetVolumeGroupSnapshotRequest;
import csi.v1.Csi.GroupControllerGetCapabilitiesRequest;
import csi.v1.Csi.GroupControllerServiceCapability;
import csi.v1.Csi.ListSnapshotsRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeGroupSnapshot;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Group snapshots (the CSI GroupController) across two node-servers, as csi-snapshotter asks for
 * them: volumes of two nodes, mounted with ext4 and xfs, written, cut as one group while mounted,
 * each member restored on its node and checked by checksum; the same call again, the same name of
 * other volumes, an NFS member, Get and Delete.
 */
@Tag("root")
class GroupSnapshotTest {

    private static final Pattern WINDOW = Pattern.compile("group snapshot taken.*?freeze_window_ms[=\\\" :]+([0-9.]+)");

    @TempDir
    static Path dir;

    static Cluster cluster;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        cluster = Cluster.start(dir, "node-a", "node-b");
        PipelineTest.cluster = cluster;
        SnapshotTest.cluster = cluster;
    }

    @AfterAll
    static void stop() throws Exception {
        PipelineTest.cluster = null;
        SnapshotTest.cluster = null;
        if (cluster != null) {
            cluster.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir));
    }

    @AfterEach
    void nothingLeftFrozenOrBehind() throws Exception {
        for (String node : List.of("node-a", "node-b")) {
            try (Stream<Path> files = Files.walk(cluster.node(node).pool())) {
                List<Path> left = files.filter(file -> file.toString().endsWith(".img") || file.toString().endsWith(".record")
                        || file.toString().endsWith(".frozen")).toList();
                assertEquals(List.of(), left, "every volume and snapshot was deleted, no freeze left");
            }
        }
    }

    /** A volume of the group, published on its node, with the checksum of the file written before the cut. */
    private record Member(SnapshotTest.Published published, String checksum) {}

    private static Member member(String name, String node, VolumeCapability capability) throws Exception {
        Volume volume = SnapshotTest.create(name, 64 * MIB, capability, node, null);
        SnapshotTest.Published published = SnapshotTest.publish(node, volume, capability);
        return new Member(published, VolumeData.write(published.target().resolve("data"), 3 * MIB + name.length()));
    }

    private static VolumeGroupSnapshot group(String name, List<Member> members) {
        var request = CreateVolumeGroupSnapshotRequest.newBuilder().setName(name);
        members.forEach(member -> request.addSourceVolumeIds(member.published().volume().getVolumeId()));
        return cluster.groupController().createVolumeGroupSnapshot(request.build()).getGroupSnapshot();
    }

    /** Deletes the group as csi-snapshotter does, with its members' ids; on the cluster SnapshotTest's helpers use. */
    static void deleteGroup(VolumeGroupSnapshot group) {
        SnapshotTest.cluster.groupController().deleteVolumeGroupSnapshot(DeleteVolumeGroupSnapshotRequest.newBuilder()
                .setGroupSnapshotId(group.getGroupSnapshotId())
                .addAllSnapshotIds(group.getSnapshotsList().stream().map(Snapshot::getSnapshotId).toList()).build());
    }

    @Test
    void advertisesTheGroupControllerAndItsOneCapability() {
        assertEquals(List.of(GroupControllerServiceCapability.RPC.Type.CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT),
                cluster.groupController().groupControllerGetCapabilities(GroupControllerGetCapabilitiesRequest.getDefaultInstance())
                        .getCapabilitiesList().stream().map(capability -> capability.getRpc().getType()).toList());
        assertTrue(cluster.controllerIdentity().getPluginCapabilities(csi.v1.Csi.GetPluginCapabilitiesRequest.getDefaultInstance())
                .getCapabilitiesList().stream().anyMatch(capability -> capability.getService().getType()
                        == csi.v1.Csi.PluginCapability.Service.Type.GROUP_CONTROLLER_SERVICE));
    }

    /**
     * Three mounted volumes on two nodes cut as one group: every member is an ordinary snapshot
     * (listed with its group, one creation time), nothing stays frozen, each restores on its node
     * with the content written before the cut, and the group is deleted with its members.
     */
    @Test
    void aGroupAcrossTwoNodesRestoresEveryMember() throws Exception {
        List<Member> members = List.of(
                member("pvc-group-a-ext4", "node-a", mount("ext4")),
                member("pvc-group-a-xfs", "node-a", mount("xfs")),
                member("pvc-group-b-ext4", "node-b", mount("ext4")));
        VolumeGroupSnapshot group = group("group-two-nodes", members);

        assertEquals("local-group-snapshot/group-two-nodes", group.getGroupSnapshotId());
        assertTrue(group.getReadyToUse());
        assertEquals(3, group.getSnapshotsCount());
        for (Snapshot snapshot : group.getSnapshotsList()) {
            assertEquals(group.getGroupSnapshotId(), snapshot.getGroupSnapshotId());
            assertEquals(group.getCreationTime(), snapshot.getCreationTime(), "one cut, one time");
            assertTrue(snapshot.getReadyToUse());
        }
        for (Member member : members) { // thawed: writes go through at once
            SnapshotTest.writeNotFrozen(member.published().target().resolve("after"));
        }
        List<Snapshot> listed = SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder());
        assertTrue(listed.containsAll(group.getSnapshotsList()), "members are listed as ordinary snapshots: " + listed);
        Matcher window = WINDOW.matcher(cluster.logs());
        assertTrue(window.find(), "the freeze window is logged:\n" + cluster.logs());
        System.out.printf("group snapshot of 3 volumes on 2 nodes: freeze window %s ms%n", window.group(1));

        List<SnapshotTest.Published> restored = new ArrayList<>();
        for (Member member : members) {
            SnapshotTest.Published source = member.published();
            Snapshot snapshot = group.getSnapshotsList().stream()
                    .filter(s -> s.getSourceVolumeId().equals(source.volume().getVolumeId())).findFirst().orElseThrow();
            String name = source.volume().getVolumeId().substring(source.volume().getVolumeId().lastIndexOf('/') + 1) + "-restored";
            Volume volume = SnapshotTest.create(name, 0, source.capability(), source.node(), SnapshotTest.from(snapshot));
            SnapshotTest.Published published = SnapshotTest.publish(source.node(), volume, source.capability());
            assertEquals(member.checksum(), VolumeData.read(published.target().resolve("data")), "restored " + name);
            assertFalse(Files.exists(published.target().resolve("after")), "written after the cut: not in the member");
            restored.add(published);
        }

        assertEquals(group, cluster.groupController().getVolumeGroupSnapshot(GetVolumeGroupSnapshotRequest.newBuilder()
                .setGroupSnapshotId(group.getGroupSnapshotId())
                .addAllSnapshotIds(group.getSnapshotsList().stream().map(Snapshot::getSnapshotId).toList()).build()).getGroupSnapshot());
        deleteGroup(group);
        deleteGroup(group); // idempotent
        assertEquals(List.of(), SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder()).stream()
                .filter(snapshot -> snapshot.getGroupSnapshotId().equals(group.getGroupSnapshotId())).toList());
        assertCode(Status.Code.NOT_FOUND, () -> cluster.groupController().getVolumeGroupSnapshot(GetVolumeGroupSnapshotRequest.newBuilder()
                .setGroupSnapshotId(group.getGroupSnapshotId()).build()));
        // The restored volumes do not depend on the members.
        for (int i = 0; i < restored.size(); i++) {
            assertEquals(members.get(i).checksum(), VolumeData.read(restored.get(i).target().resolve("data")));
            SnapshotTest.delete(restored.get(i));
            SnapshotTest.delete(members.get(i).published());
        }
    }

    /** The same name and volumes: the same group, whatever their order; other volumes: ALREADY_EXISTS. */
    @Test
    void idempotentByNameAndVolumes() throws Exception {
        Member a = member("pvc-idem-a", "node-a", mount("ext4"));
        Member b = member("pvc-idem-b", "node-b", mount("xfs"));
        VolumeGroupSnapshot first = group("group-idem", List.of(a, b));
        VolumeGroupSnapshot again = group("group-idem", List.of(b, a));
        assertEquals(first, again, "same group id, members and creation time");
        assertCode(Status.Code.ALREADY_EXISTS, () -> group("group-idem", List.of(a)));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> cluster.groupController().getVolumeGroupSnapshot(
                GetVolumeGroupSnapshotRequest.newBuilder().setGroupSnapshotId(first.getGroupSnapshotId())
                        .addSnapshotIds(first.getSnapshots(0).getSnapshotId()).build()));
        // A member is an ordinary snapshot: the same name through CreateSnapshot is it, not another.
        Snapshot member = first.getSnapshots(0);
        String name = member.getSnapshotId().substring(member.getSnapshotId().lastIndexOf('/') + 1);
        assertCode(Status.Code.ALREADY_EXISTS, () -> SnapshotTest.snapshot(name, first.getSnapshots(0).getSourceVolumeId().equals(
                a.published().volume().getVolumeId()) ? a.published().volume() : b.published().volume()));
        deleteGroup(first);
        VolumeGroupSnapshot other = group("group-idem", List.of(a));
        assertEquals(1, other.getSnapshotsCount(), "once deleted, the name is free");
        deleteGroup(other);
        SnapshotTest.delete(a.published());
        SnapshotTest.delete(b.published());
    }

    /** What csi-sanity checks, and what the driver refuses: a member that is an NFS directory, an unknown volume, the same twice. */
    @Test
    void refusals() throws Exception {
        var groups = cluster.groupController();
        assertCode(Status.Code.INVALID_ARGUMENT, () -> groups.createVolumeGroupSnapshot(CreateVolumeGroupSnapshotRequest.getDefaultInstance()));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> groups.getVolumeGroupSnapshot(GetVolumeGroupSnapshotRequest.getDefaultInstance()));
        assertCode(Status.Code.NOT_FOUND, () -> groups.getVolumeGroupSnapshot(GetVolumeGroupSnapshotRequest.newBuilder()
                .setGroupSnapshotId("no-such-group").build()));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> groups.deleteVolumeGroupSnapshot(DeleteVolumeGroupSnapshotRequest.getDefaultInstance()));
        groups.deleteVolumeGroupSnapshot(DeleteVolumeGroupSnapshotRequest.newBuilder().setGroupSnapshotId("no-such-group").build());

        Member local = member("pvc-refused", "node-a", mount("ext4"));
        String id = local.published().volume().getVolumeId();
        StatusRuntimeException nfs = assertCode(Status.Code.FAILED_PRECONDITION, () -> groups.createVolumeGroupSnapshot(
                CreateVolumeGroupSnapshotRequest.newBuilder().setName("group-nfs").addSourceVolumeIds(id)
                        .addSourceVolumeIds("nfs/server/%2Fshare/sub/delete").build()));
        assertTrue(nfs.getStatus().getDescription().contains("point-in-time"), nfs.getStatus().getDescription());
        assertCode(Status.Code.NOT_FOUND, () -> groups.createVolumeGroupSnapshot(CreateVolumeGroupSnapshotRequest.newBuilder()
                .setName("group-unknown").addSourceVolumeIds(id).addSourceVolumeIds("local/node-a/pvc-nobody-made").build()));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> groups.createVolumeGroupSnapshot(CreateVolumeGroupSnapshotRequest.newBuilder()
                .setName("group-twice").addSourceVolumeIds(id).addSourceVolumeIds(id).build()));
        assertCode(Status.Code.INVALID_ARGUMENT, () -> groups.createVolumeGroupSnapshot(CreateVolumeGroupSnapshotRequest.newBuilder()
                .setName("group-params").addSourceVolumeIds(id).putAllParameters(Map.of("bogus", "1")).build()));
        assertEquals(List.of(), SnapshotTest.listSnapshots(ListSnapshotsRequest.newBuilder()), "a refused group leaves no member");
        SnapshotTest.writeNotFrozen(local.published().target().resolve("after"));
        SnapshotTest.delete(local.published());
    }

    static StatusRuntimeException assertCode(Status.Code code, org.junit.jupiter.api.function.Executable call) {
        StatusRuntimeException e = assertThrows(StatusRuntimeException.class, call);
        assertEquals(code, e.getStatus().getCode(), e.getStatus().getDescription());
        return e;
    }
}
