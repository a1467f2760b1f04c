package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.CreateSnapshotRequest;
import csi.v1.Csi.CreateVolumeGroupSnapshotRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteSnapshotRequest;
import csi.v1.Csi.DeleteVolumeGroupSnapshotRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.Volume;
import csi.v1.Csi.VolumeCapability;
import csi.v1.Csi.VolumeContentSource;
import csi.v1.Csi.VolumeGroupSnapshot;
import dev.strata.csi.e2e.EncryptedVolumes.Staged;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestVolumeGroup;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Group snapshots of thin LVM volumes on one node (which has an image pool too), with real processes, lvm2 and device-mapper,
 * under a writer that writes sequence number n to volume A, fsyncs, then n to volume B, fsyncs
 * (GroupConsistencyTest's): each group's members are restored through the CSI calls, and the
 * restored pair must hold B = A or A - 1, and the data written before, by checksum.
 * <ul>
 * <li>ext4 and xfs filesystems on the logical volumes: lvcreate suspends a thin snapshot's origin
 *     with the kernel's freeze of its filesystem, which the group holds frozen already (FIFREEZE).
 *     Where the kernel nests the two (Linux 6.8 and later) the group is taken; before (the VM's
 *     Debian 12 kernel, 6.1) lvcreate gets EBUSY, and the group must be FAILED_PRECONDITION with
 *     nothing left: no member, no frozen filesystem (the writer goes on), no suspended device,
 *     and the thin pool still takes a snapshot.</li>
 * <li>ext4 and xfs on LUKS2 over the logical volumes: the group freezes the filesystems on the
 *     dm-crypt mappings, and lvcreate's freeze of the logical volume finds no filesystem of its
 *     own: taken on either kernel.</li>
 * <li>ext4 on LUKS2 over an image of the node's image pool with xfs on LUKS2 over a thin volume:
 *     the image pool's mapping is found and frozen as the LVM one is.</li>
 * <li>a linear volume in a group: FAILED_PRECONDITION before any freeze.</li>
 * </ul>
 * Each group's freeze window (controller-server's log) is printed. Needs device-mapper with thin
 * provisioning and dm-crypt: hack/lvm-vm.sh runs it in a VM (VM_KERNEL picks the kernel);
 * elsewhere it is skipped. {@code -Dstrata.lvmgroup.rounds} sets the groups per pair (2).
 */
@Tag("root")
class LvmGroupSnapshotTest {

    private static final long MIB = 1L << 20;
    private static final int ROUNDS = Integer.getInteger("strata.lvmgroup.rounds", 2);
    private static final Map<String, String> THIN = Map.of("pool", "lvm");
    private static final Map<String, String> ENCRYPTED = Map.of("pool", "lvm", "encryption", "luks2");
    private static final Map<String, String> ENCRYPTED_IMAGE = Map.of("pool", "image", "encryption", "luks2");
    private static final Map<String, String> LINEAR = Map.of("pool", "lvm", "lvType", "linear");
    private static final Map<String, String> SECRETS = Map.of("passphrase", "k3y-" + Long.toHexString(new Random().nextLong()));
    /** mkfs.xfs takes 300 MiB at least; a LUKS2 header 16 MiB. */
    private static final long XFS_BYTES = 336 * MIB;

    @TempDir
    static Path dir;

    static TestVolumeGroup group;
    static Cluster cluster;
    static String kernel;

    @BeforeAll
    static void start() throws Exception {
        EncryptedVolumes.requireDmCrypt();
        TestVolumeGroup.requireDeviceMapper();
        kernel = SystemState.run("uname", "-r").strip();
        group = TestVolumeGroup.make(dir, "strata-group-" + ProcessHandle.current().pid(), "3G", "2560m");
        // lvm2's commands take seconds in an emulated VM: calls to agents get a longer deadline than --agent-call-timeout's 5 s.
        cluster = Cluster.start(dir.resolve("cluster"), List.of("--agent-plaintext", "true"), List.of("--agent-call-timeout", "120s"),
                Map.of());
        // Both pools: a group may have members in each.
        cluster.startNode("node-a", Cluster.Launch.HOST.with(Map.of("VOLUME_GROUP", group.name(), "THIN_POOL", TestVolumeGroup.THIN_POOL)));
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        SystemState.cleanUp(dir.resolve("cluster"));
        if (group != null) {
            group.close();
        }
    }

    @AfterEach
    void nothingLeftBehind() throws Exception {
        assertEquals(List.of(), SystemState.cleanUp(dir.resolve("cluster")), "the test left mounts or loop devices behind");
        assertEquals(List.of(), group.driverVolumes(), "the test left logical volumes behind");
        assertEquals("", suspended(), "no device-mapper device stays suspended");
    }

    /** Linux 6.8 and later: a block device's freeze (lvcreate's suspend) nests inside a filesystem's FIFREEZE. */
    static boolean freezesNest() {
        Matcher version = Pattern.compile("^(\\d+)\\.(\\d+)").matcher(kernel);
        assertTrue(version.find(), kernel);
        int major = Integer.parseInt(version.group(1));
        return major > 6 || major == 6 && Integer.parseInt(version.group(2)) >= 8;
    }

    @Test
    void thinExt4AndXfsVolumesAreCutTogetherWhereTheKernelNestsTheFreezesElseRefusedWithNothingLeft() throws Exception {
        Staged a = staged("pvc-plain-a", 64 * MIB, "ext4", THIN, Map.of());
        Staged b = staged("pvc-plain-b", XFS_BYTES, "xfs", THIN, Map.of());
        if (freezesNest()) {
            cutUnderLoad("thin ext4 + xfs", a, b, List.of(THIN, THIN), Map.of());
        } else {
            refusedWithNothingLeft(a, b);
        }
        remove(a, b);
    }

    @Test
    void encryptedThinExt4AndXfsVolumesAreCutTogether() throws Exception {
        Staged a = staged("pvc-luks-a", 64 * MIB, "ext4", ENCRYPTED, SECRETS);
        Staged b = staged("pvc-luks-b", XFS_BYTES, "xfs", ENCRYPTED, SECRETS);
        cutUnderLoad("LUKS2 on thin, ext4 + xfs", a, b, List.of(ENCRYPTED, ENCRYPTED), SECRETS);
        remove(a, b);
    }

    /** The image pool's encrypted volume is frozen on its mapping over the loop device, as the LVM one over its logical volume. */
    @Test
    void anEncryptedImageAndAnEncryptedThinVolumeAreCutTogether() throws Exception {
        Staged a = staged("pvc-mixed-a", 64 * MIB, "ext4", ENCRYPTED_IMAGE, SECRETS);
        Staged b = staged("pvc-mixed-b", XFS_BYTES, "xfs", ENCRYPTED, SECRETS);
        cutUnderLoad("LUKS2 on an image (ext4) and on thin LVM (xfs)", a, b, List.of(ENCRYPTED_IMAGE, ENCRYPTED), SECRETS);
        remove(a, b);
    }

    @Test
    void aLinearMemberIsRefusedBeforeAnyFreeze() throws Exception {
        Staged linear = staged("pvc-linear", 64 * MIB, "ext4", LINEAR, Map.of());
        Staged thin = staged("pvc-thin", 64 * MIB, "ext4", THIN, Map.of());
        StatusRuntimeException refused = GroupSnapshotTest.assertCode(Status.Code.FAILED_PRECONDITION, () -> group("linear-0", linear, thin));
        assertTrue(refused.getStatus().getDescription().contains("linear"), refused.getStatus().getDescription());
        assertEquals(List.of(), logsOf("linear-0", "filesystems frozen"), "refused before any freeze");
        for (Staged volume : List.of(linear, thin)) {
            SnapshotTest.writeNotFrozen(volume.target().resolve("after"));
        }
        assertEquals(List.of(), snapshotVolumes(), "no member left");
        System.out.println("lvm: group snapshot with a linear member: FAILED_PRECONDITION before any freeze (" + refused.getStatus()
                .getDescription() + ")");
        remove(linear, thin);
    }

    /** ROUNDS groups of {@code a} and {@code b} under the writer, each restored (into their classes, {@code parameters}) and checked. */
    private void cutUnderLoad(String what, Staged a, Staged b, List<Map<String, String>> parameters, Map<String, String> secrets)
            throws Exception {
        String dataA = VolumeData.write(a.target().resolve("data"), 3 * MIB + 1);
        String dataB = VolumeData.write(b.target().resolve("data"), 3 * MIB + 2);
        Process writer = GroupConsistencyTest.writer(a.target(), b.target());
        List<String> rounds = new ArrayList<>();
        List<Double> windows = new ArrayList<>();
        try {
            Thread.sleep(2000);
            for (int i = 0; i < ROUNDS; i++) {
                String name = a.name().substring(4) + "-" + i;
                VolumeGroupSnapshot cut = group(name, a, b);
                assertEquals(2, cut.getSnapshotsCount());
                assertTrue(writer.isAlive(), "the writer runs");
                windows.add(GroupConsistencyTest.window(cluster, name));
                Staged ra = restored(member(cut, a), a, parameters.get(0), secrets);
                Staged rb = restored(member(cut, b), b, parameters.get(1), secrets);
                long seqA = Long.parseLong(Files.readString(ra.target().resolve("seq")).strip());
                long seqB = Long.parseLong(Files.readString(rb.target().resolve("seq")).strip());
                rounds.add("A=" + seqA + " B=" + seqB);
                assertTrue(seqB == seqA || seqB == seqA - 1, "group " + name + ": the restored pair A=" + seqA + " B=" + seqB
                        + " is one the writer never left");
                assertEquals(dataA, VolumeData.read(ra.target().resolve("data")), "A's data in its restored member");
                assertEquals(dataB, VolumeData.read(rb.target().resolve("data")), "B's data in its restored member");
                remove(ra, rb);
                deleteGroup(cut);
            }
            assertTrue(writer.isAlive(), "the writer ran throughout");
        } finally {
            GroupConsistencyTest.stopWriter(writer);
        }
        System.out.printf("lvm: group snapshot of %s on Linux %s: the invariant held in %d of %d, restored pairs %s; freeze windows %s ms%n",
                what, kernel, rounds.size(), ROUNDS, rounds, windows);
    }

    /** Linux before 6.8: FAILED_PRECONDITION, no member, nothing frozen or suspended, and the thin pool still snapshots. */
    private void refusedWithNothingLeft(Staged a, Staged b) throws Exception {
        Process writer = GroupConsistencyTest.writer(a.target(), b.target());
        try {
            Thread.sleep(2000);
            StatusRuntimeException refused = GroupSnapshotTest.assertCode(Status.Code.FAILED_PRECONDITION, () -> group("plain-0", a, b));
            assertTrue(refused.getStatus().getDescription().contains("Linux before 6.8"), refused.getStatus().getDescription());
            assertEquals(List.of(), snapshotVolumes(), "no member left");
            assertEquals("", suspended(), "no device stays suspended");
            long before = Long.parseLong(Files.readString(a.target().resolve("seq")).strip());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            long after = before;
            while (after == before && System.nanoTime() < deadline) {
                Thread.sleep(100);
                after = Long.parseLong(Files.readString(a.target().resolve("seq")).strip());
            }
            assertTrue(after > before, "the writer goes on: no filesystem stays frozen");
            System.out.println("lvm: group snapshot of thin ext4 + xfs on Linux " + kernel + ": FAILED_PRECONDITION, no member, "
                    + "nothing frozen or suspended (" + refused.getStatus().getDescription() + ")");
        } finally {
            GroupConsistencyTest.stopWriter(writer);
        }
        // lvm2 left its metadata and the kernel's thin pool in step: a single snapshot is taken and removed.
        Snapshot single = cluster.controller().createSnapshot(CreateSnapshotRequest.newBuilder().setName("plain-single")
                .setSourceVolumeId(a.volume().getVolumeId()).build()).getSnapshot();
        assertTrue(single.getReadyToUse());
        cluster.controller().deleteSnapshot(DeleteSnapshotRequest.newBuilder().setSnapshotId(single.getSnapshotId()).build());
    }

    private static Staged staged(String name, long bytes, String fsType, Map<String, String> parameters, Map<String, String> secrets)
            throws Exception {
        return staged(name, bytes, fsType, parameters, secrets, null);
    }

    private static Staged staged(String name, long bytes, String fsType, Map<String, String> parameters, Map<String, String> secrets,
            VolumeContentSource source) throws Exception {
        VolumeCapability capability = PipelineTest.mount(fsType);
        CreateVolumeRequest.Builder request = CreateVolumeRequest.newBuilder().setName(name).addVolumeCapabilities(capability)
                .putAllParameters(parameters).setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(bytes))
                .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(PipelineTest.on("node-a"))
                        .addRequisite(PipelineTest.on("node-a")));
        if (source != null) {
            request.setVolumeContentSource(source);
        }
        Volume volume = cluster.controller().createVolume(request.build()).getVolume();
        Staged staged = Staged.attach(cluster, "node-a", volume, capability);
        staged.stage(secrets);
        staged.publish();
        return staged;
    }

    /** The member restored into a new volume of its source's size and class, staged and published on node-a. */
    private static Staged restored(Snapshot member, Staged source, Map<String, String> parameters, Map<String, String> secrets)
            throws Exception {
        return staged("restored-" + member.getSnapshotId().substring(member.getSnapshotId().lastIndexOf('/') + 1),
                source.volume().getCapacityBytes(), source.capability().getMount().getFsType(), parameters, secrets,
                VolumeContentSource.newBuilder().setSnapshot(VolumeContentSource.SnapshotSource.newBuilder()
                        .setSnapshotId(member.getSnapshotId())).build());
    }

    /** Unpublished, unstaged, detached and deleted. */
    private static void remove(Staged... volumes) {
        for (Staged volume : volumes) {
            volume.unstage();
            volume.detachDelete();
        }
    }

    /**
     * The group, asked again while UNAVAILABLE or ABORTED as csi-snapshotter does: under emulation
     * a node's first freeze (lvm2's reports, cold code) can take longer than the controller waits.
     */
    private static VolumeGroupSnapshot group(String name, Staged... members) throws InterruptedException {
        var request = CreateVolumeGroupSnapshotRequest.newBuilder().setName(name);
        for (Staged member : members) {
            request.addSourceVolumeIds(member.volume().getVolumeId());
        }
        return SidecarRetry.untilDone(Duration.ofMinutes(5),
                () -> cluster.groupController().createVolumeGroupSnapshot(request.build())).getGroupSnapshot();
    }

    private static void deleteGroup(VolumeGroupSnapshot group) {
        cluster.groupController().deleteVolumeGroupSnapshot(DeleteVolumeGroupSnapshotRequest.newBuilder()
                .setGroupSnapshotId(group.getGroupSnapshotId())
                .addAllSnapshotIds(group.getSnapshotsList().stream().map(Snapshot::getSnapshotId).toList()).build());
    }

    /** The logical volumes of snapshots: members left behind. */
    private static List<String> snapshotVolumes() throws Exception {
        return group.driverVolumes().stream().filter(name -> name.startsWith("snap.")).toList();
    }

    private static Snapshot member(VolumeGroupSnapshot group, Staged volume) {
        return group.getSnapshotsList().stream().filter(s -> s.getSourceVolumeId().equals(volume.volume().getVolumeId())).findFirst()
                .orElseThrow();
    }

    /** node-a's log lines about group {@code name} that contain {@code text}. */
    private static List<String> logsOf(String name, String text) {
        return cluster.node("node-a").process().output().lines().filter(line -> line.contains(name) && line.contains(text)).toList();
    }

    /** The device-mapper devices that are suspended now, one a line. */
    private static String suspended() throws Exception {
        return SystemState.run("dmsetup", "info", "-c", "--noheadings", "-o", "name,suspended", "--separator", " ").lines()
                .filter(line -> line.endsWith("Suspended")).reduce("", (all, line) -> all + line + "\n");
    }
}
