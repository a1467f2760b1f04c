package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.Timestamp;
import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.backend.local.records.GroupMember;
import dev.strata.csi.backend.local.records.SnapshotGroup;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.fs.FilesystemFreezer;
import dev.strata.csi.node.local.image.InMemoryImageFiles;
import dev.strata.csi.node.local.image.InMemoryLoopDevices;
import dev.strata.csi.node.mount.InMemoryMounter;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.system.Crashes;
import io.grpc.Status;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A group snapshot's cut on one node, on the in-memory stand-ins (no root): the mounted members'
 * filesystems frozen together, each freeze recorded first and forgotten after the thaw, the copies
 * made without freezing again, a failed freeze undone; members carry their group and are removed
 * at the next start until committed. The same on real filesystems: GroupSnapshotTest.
 */
class GroupCutTest {

    static final long GIB = 1L << 30;

    @TempDir
    Path dir;
    @TempDir
    Path mounts;
    final InMemoryMounter mounter = new InMemoryMounter();
    final InMemoryLoopDevices loops = new InMemoryLoopDevices(mounter);
    final InMemoryImageFiles files = new InMemoryImageFiles(10 * GIB);
    final Freezer freezer = new Freezer();
    NodePools pools;

    /** Keeps which mount points are frozen, and every freeze and thaw; fails the freeze of one mount point when told. */
    static final class Freezer implements FilesystemFreezer {
        final List<Path> frozen = Collections.synchronizedList(new ArrayList<>());
        final List<String> calls = Collections.synchronizedList(new ArrayList<>());
        volatile Path failing;

        @Override
        public void freeze(Path mountPoint) throws DeviceException {
            calls.add("freeze " + mountPoint.getFileName());
            if (mountPoint.equals(failing) || frozen.contains(mountPoint)) {
                throw new DeviceException("cannot freeze " + mountPoint + ": EBUSY");
            }
            frozen.add(mountPoint);
        }

        @Override
        public boolean thaw(Path mountPoint) {
            calls.add("thaw " + mountPoint.getFileName());
            return frozen.remove(mountPoint);
        }
    }

    @BeforeEach
    void start() throws Exception {
        pools = newPools();
    }

    NodePools newPools() {
        return new NodePools(new ImagePool(dir, files, loops, mounter, freezer, Crashes.none(), Clock.systemUTC(),
                new Log(new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8), 0)), Optional.empty());
    }

    /** A volume attached and its filesystem mounted at {@code mounts/<name>}. */
    Path mounted(String name) throws Exception {
        PlainVolumes.create(pools.images(), name, GIB, Allocation.SPARSE, Optional.empty());
        String device = pools.images().attach(name, "node-1").getDevicePath();
        Path at = Files.createDirectories(mounts.resolve(name));
        mounter.mount(device, at, "ext4", List.of());
        return at;
    }

    static VolumeSnapshots.Membership member(String group, String... volumes) {
        SnapshotGroup.Builder record = SnapshotGroup.newBuilder().setName(group);
        for (int i = 0; i < volumes.length; i++) {
            record.addMembers(GroupMember.newBuilder().setNodeId("node-1").setVolume(volumes[i]).setSnapshot(group + "-" + i));
        }
        return new VolumeSnapshots.Membership(record.build(), Timestamp.newBuilder().setSeconds(1_800_000_000L).build());
    }

    List<Path> freezeRecords() throws Exception {
        try (Stream<Path> listed = Files.list(dir)) {
            return listed.filter(file -> file.toString().endsWith(Freezes.SUFFIX)).toList();
        }
    }

    /** An encrypted volume's filesystem is on the dm-crypt mapping stacked on its loop device: that one is frozen. */
    @Test
    void anEncryptedMembersFilesystemOnItsMappingIsFrozen() throws Exception {
        PlainVolumes.create(pools.images(), "pvc-crypt", GIB, Allocation.SPARSE, Optional.empty());
        String device = pools.images().attach("pvc-crypt", "node-1").getDevicePath();
        DeviceNumber mapping = new DeviceNumber(254, 7);
        loops.stack(Path.of(device), mapping);
        mounter.addDevice(Path.of("/dev/dm-7"), mapping);
        Path at = Files.createDirectories(mounts.resolve("pvc-crypt"));
        mounter.mount("/dev/dm-7", at, "ext4", List.of());
        FrozenVolumes frozen = pools.freeze(List.of("pvc-crypt"));
        assertEquals(1, frozen.count());
        assertEquals(List.of(at), freezer.frozen);
        frozen.release();
        assertEquals(List.of(), freezer.frozen);
    }

    @Test
    void theMountedMembersAreFrozenTogetherCopiedAsTheyAreAndThawed() throws Exception {
        Path a = mounted("pvc-a");
        Path b = mounted("pvc-b");
        PlainVolumes.create(pools.images(), "pvc-idle", GIB, Allocation.SPARSE, Optional.empty()); // not staged: nothing to freeze
        VolumeSnapshots.Membership group = member("g", "pvc-a", "pvc-b", "pvc-idle");
        List<VolumeSnapshots.Pending> pending = new ArrayList<>();
        for (String volume : List.of("pvc-a", "pvc-b", "pvc-idle")) {
            int i = pending.size();
            pending.add(pools.images().snapshots().prepare("g-" + i, volume, false, List.of(), Optional.of(group)));
        }

        FrozenVolumes frozen = pools.freeze(List.of("pvc-a", "pvc-b", "pvc-idle"));
        assertEquals(2, frozen.count());
        assertEquals(List.of(a, b), freezer.frozen.stream().sorted().toList());
        assertEquals(2, freezeRecords().size(), "each freeze recorded");
        pending.getFirst().copy(); // a copy of a frozen member does not freeze it again (EBUSY)
        frozen.thawTaken("pvc-a");
        assertEquals(List.of(b), freezer.frozen, "a member taken is thawed at once, the others stay frozen");
        assertEquals(2, freezeRecords().size(), "the freezes stay recorded until released");
        for (VolumeSnapshots.Pending member : pending.subList(1, pending.size())) {
            member.copy();
        }
        assertFalse(frozen.released());
        assertTrue(frozen.release().toNanos() > 0, "the window: the longest member's");
        assertTrue(frozen.released());
        assertEquals(List.of(), freezer.frozen);
        assertEquals(List.of(), freezeRecords(), "forgotten once thawed");
        frozen.release();
        frozen.thawTaken("pvc-b");
        assertEquals(2, freezer.calls.stream().filter(call -> call.startsWith("thaw")).count(), "thawed once, whoever asks again");

        List<Snapshot> members = new ArrayList<>();
        for (VolumeSnapshots.Pending member : pending) {
            members.add(member.finish());
        }
        for (Snapshot snapshot : members) {
            assertEquals("g", snapshot.getGroup().getName());
            assertEquals(3, snapshot.getGroup().getMembersCount());
            assertEquals(group.cut(), snapshot.getCreationTime(), "the cut's time");
            assertFalse(snapshot.getGroup().getCommitted());
        }
        CsiException single = assertThrows(CsiException.class, () -> pools.images().snapshots().take("g-0", "pvc-a", false));
        assertEquals(Status.Code.ALREADY_EXISTS, single.code(), "a member's name is not another snapshot's");
    }

    @Test
    void aFreezeThatFailsThawsTheOthersAndForgetsEveryRecord() throws Exception {
        mounted("pvc-a");
        freezer.failing = mounted("pvc-b");
        assertThrows(DeviceException.class, () -> pools.freeze(List.of("pvc-a", "pvc-b")));
        assertEquals(List.of(), freezer.frozen);
        assertEquals(List.of(), freezeRecords());
        CsiException missing = assertThrows(CsiException.class, () -> pools.freeze(List.of("pvc-nobody")));
        assertEquals(Status.Code.NOT_FOUND, missing.code());
    }

    /** A member whose group never committed is removed at the next start; a committed one stays. */
    @Test
    void membersNeverCommittedAreRemovedAtTheNextStart() throws Exception {
        PlainVolumes.create(pools.images(), "pvc-a", GIB, Allocation.SPARSE, Optional.empty());
        pools.images().snapshots().take("kept-0", "pvc-a", false, Optional.of(member("kept", "pvc-a")));
        pools.images().snapshots().take("broken-0", "pvc-a", false, Optional.of(member("broken", "pvc-a")));
        List<Snapshot> committed = pools.commitGroup("kept");
        assertEquals(1, committed.size());
        assertTrue(committed.getFirst().getGroup().getCommitted());
        assertEquals(committed, pools.commitGroup("kept"), "committed once, the same again");

        NodePools restarted = newPools();
        restarted.reconcile();
        assertEquals(List.of("kept-0"), restarted.snapshots().stream().map(Snapshot::getName).toList());
        assertFalse(Files.exists(restarted.images().snapshots().path("broken-0")));
    }

    /** A freeze a crash left is thawed at the next start from its record. */
    @Test
    void aFreezeLeftByACrashIsThawedAtStart() throws Exception {
        Path a = mounted("pvc-a");
        pools.freeze(List.of("pvc-a")); // never thawed: the process "dies"
        assertEquals(List.of(a), freezer.frozen);
        newPools().reconcile();
        assertEquals(List.of(), freezer.frozen);
        assertEquals(List.of(), freezeRecords());
    }
}
