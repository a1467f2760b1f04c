package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.LvType;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.lvm.InMemoryLogicalVolumes;
import dev.strata.csi.node.local.lvm.InMemoryThinMappings;
import dev.strata.csi.node.local.lvm.LogicalVolumes;
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
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The LVM pool's logic on the in-memory stand-in for the lvm2 tools (this machine's kernel has no
 * device-mapper; hack/lvm-vm.sh runs {@link LvmPoolSystemTest} on the real tools): records on a
 * real directory, the in-memory mount table, and what the logical volumes are after each call. A step
 * that fails between two others stands for a node that died there; a new pool over the same
 * records and volume group, reconciled, must complete or undo the operation.
 */
class LvmPoolTest {

    private static final long GIB = 1L << 30;
    private static final long MIB = 1L << 20;

    @TempDir
    Path dir;

    private final InMemoryLogicalVolumes lvm = new InMemoryLogicalVolumes("vg-strata", 20 * GIB, "thinpool", 10 * GIB);
    private final InMemoryMounter mounter = new InMemoryMounter();
    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();

    private LvmPool pool() throws Exception {
        LvmPool pool = new LvmPool(dir, lvm, new InMemoryThinMappings(), mounter, Crashes.none(), Clock.systemUTC(), new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0));
        pool.reconcile();
        return pool;
    }

    @Test
    void aThinVolumeIsMadeInactiveAndACreateIsIdempotent() throws Exception {
        LvmPool pool = pool();
        Volume made = PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        assertEquals("", made.getDevicePath(), "not active before attach");
        var volume = lvm.find("pvc-a").orElseThrow();
        assertTrue(volume.thin(), "thin by default");
        assertFalse(volume.active());
        assertEquals(GIB, volume.sizeBytes());
        assertEquals(made, PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty()), "the same create again: the same volume");
        CsiException other = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-a", 2 * GIB, LvType.THIN, Optional.empty()));
        assertEquals(Status.Code.ALREADY_EXISTS, other.code());
        assertEquals(GIB, lvm.find("pvc-a").orElseThrow().sizeBytes(), "the volume is not touched by a refused create");
        assertEquals(List.of("pvc-a"), pool.list().stream().map(Volume::getName).toList());
    }

    @Test
    void allocationFullMakesALinearVolumeFromTheGroupsFreeExtents() throws Exception {
        LvmPool pool = pool();
        long free = lvm.groupSpace().freeBytes();
        PlainVolumes.create(pool, "pvc-linear", 3 * GIB, LvType.LINEAR, Optional.empty());
        assertFalse(lvm.find("pvc-linear").orElseThrow().thin());
        assertEquals(free - 3 * GIB, lvm.groupSpace().freeBytes());
        CsiException full = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-big", free, LvType.LINEAR, Optional.empty()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, full.code());
        assertTrue(lvm.find("pvc-big").isEmpty());
        assertTrue(pool.get("pvc-big").isEmpty(), "nothing recorded for a refused volume");
    }

    @Test
    void aLinearVolumeReadsAsZerosWhereItsExtentsHeldOldDataAcrossCrashesInZeroingAndAGrowth() throws Exception {
        InMemoryLogicalVolumes disk = new InMemoryLogicalVolumes("vg-strata", 256 * MIB, "thinpool", 64 * MIB)
                .devicesIn(Files.createDirectories(dir.resolve("devices")));
        Path records = Files.createDirectories(dir.resolve("records"));
        LvmPool pool = reconciled(new LvmPool(records, disk, new InMemoryThinMappings(), mounter, Crashes.none(), Clock.systemUTC(), quiet()));

        disk.failNext("blkdiscard"); // lvcreate done, the node dies before its extents are zeroed
        assertThrows(DeviceException.class, () -> PlainVolumes.create(pool, "pvc-linear", 8 * MIB, LvType.LINEAR, Optional.empty()));
        assertEquals(InMemoryLogicalVolumes.OLD_DATA, Files.readAllBytes(device(disk, "pvc-linear"))[(int) MIB], "old data, not handed out");
        reconciled(new LvmPool(records, disk, new InMemoryThinMappings(), mounter, Crashes.none(), Clock.systemUTC(), quiet()));
        assertTrue(disk.find("pvc-linear").isEmpty(), "the next start removes the unzeroed volume of the CREATING record");

        disk.failNext("blkdiscard");
        assertThrows(DeviceException.class, () -> PlainVolumes.create(pool, "pvc-linear", 8 * MIB, LvType.LINEAR, Optional.empty()));
        PlainVolumes.create(pool, "pvc-linear", 8 * MIB, LvType.LINEAR, Optional.empty()); // the retried call makes it again
        assertZeros(Files.readAllBytes(device(disk, "pvc-linear")), 0, "the new linear volume");

        byte[] written = new byte[(int) (8 * MIB)];
        Arrays.fill(written, (byte) 0x17);
        Files.write(device(disk, "pvc-linear"), written); // the tenant's data
        disk.failNext("blkdiscard"); // lvextend done, the node dies before the new extents are zeroed
        assertThrows(DeviceException.class, () -> pool.expand("pvc-linear", 16 * MIB));
        assertEquals(8 * MIB, pool.records().ready("pvc-linear").getZeroFromBytes(), "recorded before lvextend");
        assertEquals(InMemoryLogicalVolumes.OLD_DATA, Files.readAllBytes(device(disk, "pvc-linear"))[(int) (12 * MIB)]);
        LvmPool restarted = reconciled(new LvmPool(records, disk, new InMemoryThinMappings(), mounter, Crashes.none(), Clock.systemUTC(), quiet()));
        byte[] grown = Files.readAllBytes(device(disk, "pvc-linear"));
        assertEquals(16 * MIB, grown.length);
        assertEquals(0x17, grown[(int) (8 * MIB - 1)], "the tenant's data is kept");
        assertZeros(grown, (int) (8 * MIB), "the new extents");
        assertEquals(0, restarted.records().ready("pvc-linear").getZeroFromBytes(), "done: nothing left to zero");
        assertEquals(List.of(8 * MIB), disk.zeroedFrom(), "only the new extents, once");
    }

    @Test
    void aThinPoolThatDoesNotZeroNewChunksTakesNoNewThinVolumeAndSaysWhy() throws Exception {
        lvm.zeroing(false);
        LvmPool pool = pool();
        assertTrue(logged.toString(StandardCharsets.UTF_8).contains("lvchange --zero y"), "the start says what to do: " + logged);
        CsiException refused = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-thin", GIB, LvType.THIN, Optional.empty()));
        assertEquals(Status.Code.FAILED_PRECONDITION, refused.code());
        assertTrue(refused.getMessage().contains("does not zero new chunks"), refused.getMessage());
        assertTrue(lvm.find("pvc-thin").isEmpty() && pool.records().read("pvc-thin").isEmpty(), "nothing left");
        assertTrue(pool.status().getThinFull(), "the controller places no thin volume here");
        assertEquals(0, pool.status().getAvailableBytes());
        PlainVolumes.create(pool, "pvc-linear", GIB, LvType.LINEAR, Optional.empty()); // linear volumes are zeroed by the pool itself
        lvm.zeroing(true);
        PlainVolumes.create(pool, "pvc-thin", GIB, LvType.THIN, Optional.empty());
    }

    private Log quiet() {
        return new Log(new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8), 0);
    }

    private static LvmPool reconciled(LvmPool pool) throws Exception {
        pool.reconcile();
        return pool;
    }

    private static Path device(InMemoryLogicalVolumes disk, String name) {
        return disk.find(name).orElseThrow().device();
    }

    private static void assertZeros(byte[] data, int from, String what) {
        for (int at = from; at < data.length; at++) {
            if (data[at] != 0) {
                throw new AssertionError(what + " holds " + data[at] + " at byte " + at + ", not zero");
            }
        }
    }

    @Test
    void attachActivatesAndDetachDeactivates() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        Volume attached = pool.attach("pvc-a", "node-1");
        assertEquals("/dev/mapper/vg--strata-pvc--a", attached.getDevicePath(), "the device-mapper name, dashes doubled");
        assertTrue(lvm.find("pvc-a").orElseThrow().active());
        assertEquals(List.of("node-1"), attached.getPublishedNodeIdsList());
        assertEquals(attached, pool.attach("pvc-a", "node-1"), "attach again: the same device");
        pool.detach("pvc-a", "node-1");
        assertFalse(lvm.find("pvc-a").orElseThrow().active());
        assertEquals(List.of(), pool.get("pvc-a").orElseThrow().getPublishedNodeIdsList());
        pool.detach("pvc-a", "node-1"); // again: nothing to do
        pool.detach("pvc-never", "node-1"); // a volume that does not exist: detached already
        CsiException missing = assertThrows(CsiException.class, () -> pool.attach("pvc-never", "node-1"));
        assertEquals(Status.Code.NOT_FOUND, missing.code());
    }

    /** A mount of the volume's device keeps it active and its data in place: detach and delete are refused. */
    @Test
    void aMountedVolumeIsNeitherDeactivatedNorDeleted() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        String device = pool.attach("pvc-a", "node-1").getDevicePath();
        Path mountPoint = Files.createDirectory(dir.resolve("staged"));
        // The stand-in makes no device node: the mount table learns its number as the kernel's /dev would have it.
        mounter.addDevice(Path.of(device), lvm.find("pvc-a").orElseThrow().number().orElseThrow());
        mounter.mount(device, mountPoint, "ext4", List.of());
        CsiException detach = assertThrows(CsiException.class, () -> pool.detach("pvc-a", "node-1"));
        assertEquals(Status.Code.FAILED_PRECONDITION, detach.code());
        assertTrue(detach.getMessage().contains(mountPoint.toString()), detach.getMessage());
        CsiException delete = assertThrows(CsiException.class, () -> pool.delete("pvc-a"));
        assertEquals(Status.Code.FAILED_PRECONDITION, delete.code());
        assertTrue(lvm.find("pvc-a").orElseThrow().active());
        assertTrue(pool.get("pvc-a").isPresent());
        mounter.unmount(mountPoint);
        pool.detach("pvc-a", "node-1");
        pool.delete("pvc-a");
        assertTrue(lvm.find("pvc-a").isEmpty());
    }

    @Test
    void deleteRemovesTheVolumeAndItsRecordAndIsIdempotent() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        pool.attach("pvc-a", "node-1");
        pool.detach("pvc-a", "node-1");
        pool.delete("pvc-a");
        assertTrue(lvm.find("pvc-a").isEmpty());
        assertTrue(pool.get("pvc-a").isEmpty());
        assertFalse(Files.exists(dir.resolve("pvc-a" + RecordStore.SUFFIX)));
        pool.delete("pvc-a");
    }

    /** Thin volumes reserve their whole size in the thin pool: no overcommit, and none once the metadata is nearly full. */
    @Test
    void thinVolumesAreAdmittedWithoutOvercommit() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", 6 * GIB, LvType.THIN, Optional.empty());
        assertEquals(4 * GIB, pool.status().getAvailableBytes());
        assertEquals(10 * GIB, pool.status().getTotalBytes());
        CsiException over = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-b", 5 * GIB, LvType.THIN, Optional.empty()));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, over.code());
        assertTrue(lvm.find("pvc-b").isEmpty());
        PlainVolumes.create(pool, "pvc-b", 4 * GIB, LvType.THIN, Optional.empty());
        assertEquals(0, pool.status().getAvailableBytes());
        pool.delete("pvc-a");
        assertEquals(6 * GIB, pool.status().getAvailableBytes(), "a deleted volume's reservation comes back");
        lvm.metadataPercent(96);
        assertEquals(0, pool.status().getAvailableBytes(), "a thin pool short of metadata takes nothing more");
        assertEquals(Status.Code.RESOURCE_EXHAUSTED,
                assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-c", MIB, LvType.THIN, Optional.empty())).code());
    }

    /** The thin pool's data written by someone else's volumes (or snapshots) is not there to give: it bounds what is admitted. */
    @Test
    void dataWrittenInTheThinPoolBoundsWhatIsAdmitted() throws Exception {
        lvm.addTagged("pvc-elsewhere", 8 * GIB);
        lvm.write("pvc-elsewhere", 7 * GIB);
        LvmPool pool = pool();
        assertEquals(3 * GIB, pool.status().getAvailableBytes());
        assertTrue(logged.toString(StandardCharsets.UTF_8).contains("has no record; left as it is"), logged.toString(StandardCharsets.UTF_8));
        assertTrue(lvm.find("pvc-elsewhere").isPresent(), "a tagged volume without a record is left alone");
        CsiException stray = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-elsewhere", GIB, LvType.THIN, Optional.empty()));
        assertEquals(Status.Code.FAILED_PRECONDITION, stray.code());
        assertTrue(lvm.find("pvc-elsewhere").isPresent());
    }

    @Test
    void aNameThatCannotBeALogicalVolumeIsRefused() throws Exception {
        LvmPool pool = pool();
        for (String name : List.of("../etc", "-x", "a".repeat(129), "a b")) {
            CsiException bad = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, name, GIB, LvType.THIN, Optional.empty()), name);
            assertEquals(Status.Code.INVALID_ARGUMENT, bad.code(), name);
        }
        assertEquals(List.of(), lvm.list());
    }

    /**
     * Every name CSI allows has a logical volume: one whose device-mapper name would pass the
     * kernel's 127 characters (csi-sanity's maximum-length names, 128), or that lvm2 keeps for its
     * own volumes, gets a hashed one, always the same, through the whole life of the volume and
     * its snapshots. A name that fits keeps its own.
     */
    @Test
    void aNameLvmWouldNotTakeGetsALogicalVolumeOfItsHash() throws Exception {
        LvmPool pool = pool();
        String longest = "pvc-" + "a".repeat(124);
        for (String name : List.of(longest, "pvc_tdata", "snapshot-1")) {
            Volume made = PlainVolumes.create(pool, name, GIB, LvType.THIN, Optional.empty());
            String lv = pool.lv(name);
            assertTrue(lv.startsWith(LvmPool.HASHED_PREFIX) && !lv.contains("_tdata"), lv);
            assertTrue(lvm.find(lv).isPresent(), name);
            assertEquals(made, PlainVolumes.create(pool, name, GIB, LvType.THIN, Optional.empty()), "the same create again: the same volume");
            assertTrue(pool.attach(name, "node-1").getDevicePath().endsWith(lv.replace("-", "--")), "activated");
            assertTrue(pool.attachedDevice(name).isPresent());
            pool.detach(name, "node-1");
        }
        assertEquals("pvc-a", pool.lv("pvc-a"), "external-provisioner's names are their own logical volumes");
        assertEquals(pool.lv(longest), pool.lv(longest), "the same name, the same volume");
        assertTrue(!pool.lv(longest).equals(pool.lv(longest.substring(0, 127) + "b")), "names that share their head differ");
        assertEquals(3, pool.list().size());

        String snapshot = "snapshot-" + "b".repeat(119); // 128: with the prefix snap. too long even for a volume name
        pool.snapshots().take(snapshot, longest, false);
        assertTrue(lvm.find(pool.lv(LvmPool.SNAPSHOT_PREFIX + snapshot)).isPresent(), "the thin snapshot");
        PlainVolumes.create(pool, "pvc-restored", GIB, LvType.THIN, Optional.of(ContentSource.newBuilder().setSnapshot(snapshot).build()));
        assertTrue(lvm.find("pvc-restored").isPresent());

        LvmPool restarted = pool(); // reconcile knows them all: nothing reported as without a record
        assertFalse(logged.toString(StandardCharsets.UTF_8).contains("has no record"), logged.toString(StandardCharsets.UTF_8));
        restarted.snapshots().delete(snapshot);
        for (String name : List.of(longest, "pvc_tdata", "snapshot-1", "pvc-restored")) {
            restarted.delete(name);
        }
        assertEquals(List.of(), lvm.list(), "every logical volume removed, the hashed ones too");
    }

    @Test
    void aGroupWhoseNameLeavesNoRoomForAHashRefusesTheNamesThatNeedOne() throws Exception {
        InMemoryLogicalVolumes longGroup = new InMemoryLogicalVolumes("g".repeat(100), 20 * GIB, "thinpool", 10 * GIB);
        LvmPool pool = new LvmPool(dir, longGroup, new InMemoryThinMappings(), mounter, Crashes.none(), Clock.systemUTC(),
                new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0));
        PlainVolumes.create(pool, "pvc-1", GIB, LvType.THIN, Optional.empty());
        assertTrue(longGroup.find("pvc-1").isPresent());
        CsiException tooLong = assertThrows(CsiException.class, () -> PlainVolumes.create(pool, "pvc-" + "a".repeat(30), GIB, LvType.THIN,
                Optional.empty()));
        assertEquals(Status.Code.INVALID_ARGUMENT, tooLong.code(), tooLong.getMessage());
        assertEquals(List.of("pvc-1"), longGroup.list().stream().map(LogicalVolumes.LogicalVolume::name).toList());
    }

    // A node that died between two steps: the retried call, or the next start, completes or undoes the operation.

    @Test
    void aCreateCutShortBeforeLvcreateIsUndoneAtTheNextStartAndCanBeMadeAgain() throws Exception {
        LvmPool pool = pool();
        lvm.failNext("lvcreate");
        assertThrows(DeviceException.class, () -> PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty()));
        assertTrue(Files.exists(dir.resolve("pvc-a" + RecordStore.SUFFIX)), "the intent was recorded first");
        LvmPool restarted = pool();
        assertTrue(restarted.get("pvc-a").isEmpty());
        assertFalse(Files.exists(dir.resolve("pvc-a" + RecordStore.SUFFIX)), "the interrupted create's record is gone");
        assertEquals(10 * GIB, restarted.status().getAvailableBytes(), "its reservation is free again");
        PlainVolumes.create(restarted, "pvc-a", GIB, LvType.THIN, Optional.empty());
        assertTrue(lvm.find("pvc-a").isPresent());
    }

    @Test
    void aCreateRetriedAfterItsLvcreateIsCompleted() throws Exception {
        LvmPool pool = pool();
        // The record says CREATING and the volume is made: as after a crash at CREATE_ALLOCATED.
        lvm.createThin("pvc-a", GIB);
        new RecordStore(dir, new Log(new PrintStream(PrintStream.nullOutputStream()), 0)).write(
                dev.strata.csi.backend.local.records.ImageRecord.newBuilder().setName("pvc-a").setCapacityBytes(GIB)
                        .setLvType(dev.strata.csi.backend.local.records.ImageRecord.LvType.THIN)
                        .setState(dev.strata.csi.backend.local.records.ImageRecord.State.CREATING).build());
        LvmPool restarted = new LvmPool(dir, lvm, new InMemoryThinMappings(), mounter, Crashes.none(), Clock.systemUTC(), new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0));
        Volume made = PlainVolumes.create(restarted, "pvc-a", GIB, LvType.THIN, Optional.empty());
        assertEquals(GIB, made.getCapacityBytes());
        assertTrue(lvm.find("pvc-a").isPresent());
        assertTrue(restarted.get("pvc-a").isPresent(), "READY now");
    }

    @Test
    void anAttachCutShortBeforeActivationIsActivatedAtTheNextStart() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        lvm.failNext("lvchange-activate");
        assertThrows(DeviceException.class, () -> pool.attach("pvc-a", "node-1"));
        assertFalse(lvm.find("pvc-a").orElseThrow().active());
        pool();
        assertTrue(lvm.find("pvc-a").orElseThrow().active(), "the record says attached: active again");
    }

    @Test
    void aDetachCutShortBeforeDeactivationAndAVolumeActiveAfterARebootAreMadeAsTheRecordsSay() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        PlainVolumes.create(pool, "pvc-b", GIB, LvType.THIN, Optional.empty());
        pool.attach("pvc-a", "node-1");
        pool.attach("pvc-b", "node-1");
        lvm.failNext("lvchange-deactivate");
        assertThrows(DeviceException.class, () -> pool.detach("pvc-a", "node-1"));
        assertTrue(lvm.find("pvc-a").orElseThrow().active());
        // A reboot: LVM autoactivation may bring every volume up (or none); the records decide.
        lvm.deactivate("pvc-b");
        pool();
        assertFalse(lvm.find("pvc-a").orElseThrow().active(), "detached as recorded");
        assertTrue(lvm.find("pvc-b").orElseThrow().active(), "attached as recorded");
    }

    @Test
    void aDeleteCutShortIsFinishedAtTheNextStart() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        pool.attach("pvc-a", "node-1");
        lvm.failNext("lvremove");
        assertThrows(DeviceException.class, () -> pool.delete("pvc-a"));
        assertTrue(lvm.find("pvc-a").isPresent());
        assertFalse(lvm.find("pvc-a").orElseThrow().active(), "deactivated before the removal");
        assertTrue(pool.get("pvc-a").isEmpty(), "DELETING: no longer listed");
        pool();
        assertTrue(lvm.find("pvc-a").isEmpty());
        assertFalse(Files.exists(dir.resolve("pvc-a" + RecordStore.SUFFIX)));
    }

    @Test
    void expansionExtendsTheVolumeActiveOrNotAndNeverShrinksIt() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        pool.attach("pvc-a", "node-1");
        assertEquals(2 * GIB, pool.expand("pvc-a", 2 * GIB).getCapacityBytes());
        assertEquals(2 * GIB, lvm.find("pvc-a").orElseThrow().sizeBytes());
        assertTrue(lvm.find("pvc-a").orElseThrow().active(), "grown online");
        pool.expand("pvc-a", 2 * GIB); // again: nothing to do
        pool.expand("pvc-a", GIB); // smaller: nothing is shrunk
        assertEquals(2 * GIB, lvm.find("pvc-a").orElseThrow().sizeBytes());
        assertEquals(2 * GIB, pool.get("pvc-a").orElseThrow().getCapacityBytes());
        CsiException over = assertThrows(CsiException.class, () -> pool.expand("pvc-a", 11 * GIB));
        assertEquals(Status.Code.RESOURCE_EXHAUSTED, over.code());
        assertEquals(2 * GIB, lvm.find("pvc-a").orElseThrow().sizeBytes(), "unchanged when refused");
        assertEquals(8 * GIB, pool.status().getAvailableBytes(), "nor is more reserved");
        PlainVolumes.create(pool, "pvc-linear", GIB, LvType.LINEAR, Optional.empty());
        long free = lvm.groupSpace().freeBytes();
        pool.expand("pvc-linear", 2 * GIB);
        assertEquals(free - GIB, lvm.groupSpace().freeBytes(), "a linear volume's new extents come from the group");
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class, () -> pool.expand("pvc-never", GIB)).code());
    }

    @Test
    void anExpansionCutShortBeforeLvextendIsFinishedAtTheNextStart() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        lvm.failNext("lvextend");
        assertThrows(DeviceException.class, () -> pool.expand("pvc-a", 3 * GIB));
        assertEquals(GIB, lvm.find("pvc-a").orElseThrow().sizeBytes());
        assertEquals(7 * GIB, pool.status().getAvailableBytes(), "the recorded size reserves already");
        pool();
        assertEquals(3 * GIB, lvm.find("pvc-a").orElseThrow().sizeBytes(), "grown to the recorded size");
    }

    @Test
    void aSnapshotIsAThinSnapshotKeptAfterItsSourceIsDeletedAndRestoresAreThinSnapshotsOfIt() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        var taken = pool.snapshots().take("snapshot-1", "pvc-a", false);
        assertEquals("pvc-a", taken.getSourceVolume());
        assertEquals(GIB, taken.getCapacityBytes());
        var volume = lvm.find(LvmPool.SNAPSHOT_PREFIX + "snapshot-1").orElseThrow();
        assertTrue(volume.thin());
        assertFalse(volume.active(), "a snapshot is never active");
        assertEquals(taken, pool.snapshots().take("snapshot-1", "pvc-a", false), "the same snapshot again");
        PlainVolumes.create(pool, "pvc-b", GIB, LvType.THIN, Optional.empty());
        assertEquals(Status.Code.ALREADY_EXISTS, assertThrows(CsiException.class, () -> pool.snapshots().take("snapshot-1", "pvc-b", false)).code());
        assertEquals(List.of("snapshot-1"), pool.snapshots().list().stream().map(s -> s.getName()).toList());
        assertEquals(7 * GIB, pool.status().getAvailableBytes(), "a snapshot reserves its size in the thin pool: no overcommit");

        pool.delete("pvc-a");
        assertTrue(lvm.find(LvmPool.SNAPSHOT_PREFIX + "snapshot-1").isPresent(), "kept after its source is deleted");
        var fromSnapshot = dev.strata.csi.agent.api.ContentSource.newBuilder().setSnapshot("snapshot-1").build();
        Volume restored = PlainVolumes.create(pool, "pvc-restored", 2 * GIB, LvType.THIN, Optional.of(fromSnapshot));
        assertEquals(2 * GIB, lvm.find("pvc-restored").orElseThrow().sizeBytes(), "extended to the size asked for");
        assertEquals(restored, PlainVolumes.create(pool, "pvc-restored", 2 * GIB, LvType.THIN, Optional.of(fromSnapshot)));
        assertEquals(Status.Code.ALREADY_EXISTS, assertThrows(CsiException.class,
                () -> PlainVolumes.create(pool, "pvc-restored", 2 * GIB, LvType.THIN, Optional.empty())).code());
        assertEquals(Status.Code.OUT_OF_RANGE, assertThrows(CsiException.class,
                () -> PlainVolumes.create(pool, "pvc-small", GIB / 2, LvType.THIN, Optional.of(fromSnapshot))).code());
        assertEquals(Status.Code.INVALID_ARGUMENT, assertThrows(CsiException.class,
                () -> PlainVolumes.create(pool, "pvc-linear", GIB, LvType.LINEAR, Optional.of(fromSnapshot))).code());
        var missing = dev.strata.csi.agent.api.ContentSource.newBuilder().setSnapshot("snapshot-none").build();
        assertEquals(Status.Code.NOT_FOUND, assertThrows(CsiException.class,
                () -> PlainVolumes.create(pool, "pvc-c", GIB, LvType.THIN, Optional.of(missing))).code());
        assertTrue(lvm.find("pvc-small").isEmpty() && lvm.find("pvc-linear").isEmpty() && lvm.find("pvc-c").isEmpty());

        var fromVolume = dev.strata.csi.agent.api.ContentSource.newBuilder().setVolume("pvc-restored").build();
        PlainVolumes.create(pool, "pvc-clone", 2 * GIB, LvType.THIN, Optional.of(fromVolume));
        assertTrue(lvm.find("pvc-clone").orElseThrow().thin());
        pool.snapshots().delete("snapshot-1");
        pool.snapshots().delete("snapshot-1");
        assertTrue(lvm.find(LvmPool.SNAPSHOT_PREFIX + "snapshot-1").isEmpty());
        assertTrue(lvm.find("pvc-restored").isPresent(), "a restored volume outlives its snapshot");
        assertEquals(List.of(), pool.snapshots().list());
    }

    @Test
    void anEncryptedVolumeIsRecordedSoAndItsSnapshotsRestoresClonesAndCopiesCarryIt() throws Exception {
        LvmPool pool = pool();
        Volume thin = pool.create("pvc-enc", GIB, dev.strata.csi.agent.api.Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, Optional.empty(), true, 1);
        assertTrue(thin.getEncrypted() && pool.content("pvc-enc").getEncrypted());
        assertTrue(pool.create("pvc-enc-linear", GIB, dev.strata.csi.agent.api.Allocation.ALLOCATION_UNSPECIFIED, LvType.LINEAR, Optional.empty(), true, 1).getEncrypted());
        assertEquals(Status.Code.ALREADY_EXISTS, assertThrows(CsiException.class,
                () -> pool.create("pvc-enc", GIB, dev.strata.csi.agent.api.Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, Optional.empty(), false, 1)).code(), "the same name, plain");
        pool.snapshots().take("snapshot-enc", "pvc-enc", false);
        var fromSnapshot = dev.strata.csi.agent.api.ContentSource.newBuilder().setSnapshot("snapshot-enc").build();
        CsiException plain = assertThrows(CsiException.class,
                () -> pool.create("pvc-plain", GIB, dev.strata.csi.agent.api.Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, Optional.of(fromSnapshot), false, 1));
        assertEquals(Status.Code.INVALID_ARGUMENT, plain.code(), "a plain restore of an encrypted snapshot");
        assertTrue(lvm.find("pvc-plain").isEmpty());
        assertTrue(pool.create("pvc-restored", GIB, dev.strata.csi.agent.api.Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, Optional.of(fromSnapshot), true, 1).getEncrypted());
        var fromVolume = dev.strata.csi.agent.api.ContentSource.newBuilder().setVolume("pvc-enc").build();
        assertTrue(pool.create("pvc-clone", GIB, dev.strata.csi.agent.api.Allocation.ALLOCATION_UNSPECIFIED, LvType.THIN, Optional.of(fromVolume), true, 1).getEncrypted());
        try (OutgoingContent snapshot = pool.outgoing().snapshot("snapshot-enc"); OutgoingContent volume = pool.outgoing().volume("pvc-enc-linear")) {
            assertTrue(snapshot.encrypted() && volume.encrypted(), "a copy to another node says it is encrypted");
        }
    }

    @Test
    void aLinearVolumeHasNoSnapshotsAndASnapshotCutShortIsRemovedAtTheNextStart() throws Exception {
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-linear", GIB, LvType.LINEAR, Optional.empty());
        assertEquals(Status.Code.FAILED_PRECONDITION,
                assertThrows(CsiException.class, () -> pool.snapshots().take("snapshot-1", "pvc-linear", false)).code());
        assertEquals(List.of(), pool.snapshots().list());
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        lvm.failNext("lvcreate-snapshot");
        assertThrows(DeviceException.class, () -> pool.snapshots().take("snapshot-1", "pvc-a", false));
        assertEquals(List.of(), pool.snapshots().list(), "CREATING: not listed");
        pool();
        assertEquals(9 * GIB, pool.status().getAvailableBytes(), "the interrupted snapshot's reservation is free again");
        pool.snapshots().take("snapshot-1", "pvc-a", false);
        lvm.failNext("lvremove");
        assertThrows(DeviceException.class, () -> pool.snapshots().delete("snapshot-1"));
        assertEquals(List.of(), pool.snapshots().list(), "DELETING: not listed");
        pool();
        assertTrue(lvm.find(LvmPool.SNAPSHOT_PREFIX + "snapshot-1").isEmpty(), "the interrupted delete finished");
        assertFalse(logged.toString(StandardCharsets.UTF_8).contains("has no record"), "every snapshot volume is accounted for");
    }

    /**
     * What a group snapshot's cut freezes: the filesystem on the logical volume, or, for an encrypted
     * volume, the one on the dm-crypt mapping stacked on it (lvcreate's own freeze does not reach
     * that one); a block volume's bind of the device is no filesystem, and an inactive volume has none.
     */
    @Test
    void theFilesystemToFreezeIsOnTheVolumeOrOnTheDmCryptMappingStackedOnIt() throws Exception {
        LvmPool pool = pool();
        for (String name : List.of("pvc-plain", "pvc-crypt", "pvc-block", "pvc-idle")) {
            PlainVolumes.create(pool, name, GIB, LvType.THIN, Optional.empty());
        }
        String plain = pool.attach("pvc-plain", "node-1").getDevicePath();
        mounter.addDevice(Path.of(plain), lvm.find("pvc-plain").orElseThrow().number().orElseThrow());
        mounter.mount(plain, Files.createDirectory(dir.resolve("plain")), "ext4", List.of());
        pool.attach("pvc-crypt", "node-1");
        DeviceNumber mapping = new DeviceNumber(254, 90);
        lvm.stack("pvc-crypt", mapping);
        mounter.addDevice(Path.of("/dev/dm-90"), mapping);
        mounter.mount("/dev/dm-90", Files.createDirectory(dir.resolve("crypt")), "xfs", List.of());
        String block = pool.attach("pvc-block", "node-1").getDevicePath();
        mounter.addDevice(Path.of(block), lvm.find("pvc-block").orElseThrow().number().orElseThrow());
        Path target = Files.createFile(dir.resolve("block"));
        mounter.bindMount(Path.of(block), target, false);

        assertEquals(Optional.of(dir.resolve("plain")), pool.filesystemMount("pvc-plain"));
        assertEquals(Optional.of(dir.resolve("crypt")), pool.filesystemMount("pvc-crypt"), "the encrypted volume's, on its mapping");
        assertEquals(Optional.empty(), pool.filesystemMount("pvc-block"), "a block volume's bind");
        assertEquals(Optional.empty(), pool.filesystemMount("pvc-idle"), "not attached");
    }

    @Test
    void theAdminsOwnVolumesAreNeitherListedNorTouched() throws Exception {
        lvm.addForeign("root", 4 * GIB);
        LvmPool pool = pool();
        PlainVolumes.create(pool, "pvc-a", GIB, LvType.THIN, Optional.empty());
        assertEquals(List.of("pvc-a"), pool.list().stream().map(Volume::getName).toList());
        assertEquals(List.of("pvc-a"), lvm.list().stream().map(LogicalVolumes.LogicalVolume::name).toList());
    }
}
