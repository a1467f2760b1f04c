package dev.strata.csi.controller.agents;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.ContentSource;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.Inventory;
import dev.strata.csi.agent.api.InventoryChanges;
import dev.strata.csi.agent.api.PoolKind;
import dev.strata.csi.agent.api.RegisterRequest;
import dev.strata.csi.agent.api.Snapshot;
import dev.strata.csi.agent.api.SnapshotTombstone;
import java.util.List;
import org.junit.jupiter.api.Test;

class VolumeIndexTest {

    private final VolumeIndex index = new VolumeIndex();

    private static Volume volume(String name, long bytes) {
        return Volume.newBuilder().setName(name).setCapacityBytes(bytes).setAllocation(Allocation.SPARSE).build();
    }

    private static RegisterRequest everything(String node, long generation, List<Volume> volumes, List<Snapshot> snapshots) {
        return RegisterRequest.newBuilder().setNodeId(node).setInstance("i-" + node).setGeneration(generation)
                .setInventory(Inventory.newBuilder().addAllVolumes(volumes).addAllSnapshots(snapshots)).build();
    }

    private List<String> page(String from, int limit) {
        return index.volumesFrom(from, limit).stream().map(found -> found.nodeId() + "/" + found.item().getName()).toList();
    }

    /** A node reporting a name this controller made elsewhere (a compromised node) never comes first, however new its report. */
    @Test
    void whatThisControllerMadeWinsOverAnotherNodesReportOfTheName() {
        index.report(everything("evil", 5, List.of(volume("pvc-1", 1)), List.of(Snapshot.newBuilder().setName("snap-1").build())));
        assertEquals(List.of("evil"), index.volumes("pvc-1").stream().map(VolumeIndex.Located::nodeId).toList());
        assertFalse(index.volumes("pvc-1").getFirst().made(), "known from the report alone");

        index.volume("n1", "pvc-1", volume("pvc-1", 1), 1);
        index.snapshot("n1", "snap-1", Snapshot.newBuilder().setName("snap-1").build(), 1);
        index.report(everything("evil", 9, List.of(volume("pvc-1", 1)), List.of(Snapshot.newBuilder().setName("snap-1").build())));
        assertEquals(List.of("n1", "evil"), index.volumes("pvc-1").stream().map(VolumeIndex.Located::nodeId).toList());
        assertTrue(index.volumes("pvc-1").getFirst().made());
        assertEquals(List.of("n1", "evil"), index.snapshots("snap-1").stream().map(VolumeIndex.Located::nodeId).toList());

        index.report(everything("n1", 2, List.of(volume("pvc-1", 1)), List.of()));
        assertTrue(index.volumes("pvc-1").getFirst().made(), "still this controller's once its node's report confirms it");
        assertEquals("n1", index.volumes("pvc-1").getFirst().nodeId());
    }

    @Test
    void pagesFollowTheOrderOfTheIdsEvenWhenOneNodeIdStartsAnother() {
        // "a-b/x" sorts before "a/x" as strings ('-' < '/'): the order volume ids have.
        index.report(everything("a", 1, List.of(volume("x", 1), volume("y", 1)), List.of()));
        index.report(everything("a-b", 1, List.of(volume("x", 1)), List.of()));
        index.report(everything("b", 1, List.of(volume("a", 1)), List.of()));
        assertEquals(List.of("a-b/x", "a/x", "a/y", "b/a"), page("", 10));
        assertEquals(List.of("a/x", "a/y"), page("a/", 2));
        assertEquals(List.of("a/y", "b/a"), page("a/xx", 10));
        assertEquals(List.of(), page("c", 10));
    }

    @Test
    void aPageStartsWhereTheLastEndedWhateverWasCreatedOrDeletedMeanwhile() {
        index.report(everything("n1", 1, List.of(volume("a", 1), volume("b", 1), volume("c", 1), volume("d", 1)), List.of()));
        assertEquals(List.of("n1/a", "n1/b", "n1/c"), page("", 3)); // a page of two, and the next id: n1/c
        index.volume("n1", "c", null, 2); // the next page's first entry deleted
        index.volume("n1", "a0", volume("a0", 1), 3); // one made behind the token: not in this pass
        index.volume("n1", "e", volume("e", 1), 4); // one made ahead of it: listed
        assertEquals(List.of("n1/d", "n1/e"), page("n1/c", 3));
    }

    @Test
    void anImageComesBackAsReportedWithoutWhatNoListNeeds() {
        // The pool and encryption stay: a repeated CreateVolume compares them (csi-sanity with pool: lvm found them dropped).
        Volume full = volume("v", 64).toBuilder().setDevicePath("/dev/loop3").addPublishedNodeIds("n1")
                .setSource(ContentSource.newBuilder().setSnapshot("s")).setPool(PoolKind.POOL_LVM)
                .setEncrypted(true).build();
        index.report(everything("n1", 1, List.of(full, volume("w", 32)), List.of()));
        var found = index.volumes("v");
        assertEquals(1, found.size());
        assertEquals("n1", found.getFirst().nodeId());
        assertEquals(full.toBuilder().clearDevicePath().build(), found.getFirst().item());
        assertFalse(index.volumes("w").getFirst().item().hasSource());
        assertEquals(PoolKind.POOL_LVM, found.getFirst().item().getPool());
        assertTrue(found.getFirst().item().getEncrypted());
    }

    @Test
    void aReportOlderThanOwnCallsTakesNothingBack() {
        index.report(everything("n1", 5, List.of(volume("old", 1)), List.of()));
        index.volume("n1", "new", volume("new", 2), 6);
        index.volume("n1", "old", null, 7);
        // A report made at generation 5, arriving after both calls' replies: neither is undone.
        index.report(everything("n1", 5, List.of(volume("old", 1)), List.of()));
        assertEquals(List.of("n1/new"), page("", 10));
        assertTrue(index.volumes("old").isEmpty());
        // The report that includes both: the deletion mark is settled, the name may come back later.
        index.report(RegisterRequest.newBuilder().setNodeId("n1").setInstance("i-n1").setGeneration(7)
                .setChanges(InventoryChanges.newBuilder().setBaseGeneration(5).addVolumes(volume("new", 2))
                        .addRemovedVolumes("old")).build());
        index.report(RegisterRequest.newBuilder().setNodeId("n1").setInstance("i-n1").setGeneration(8)
                .setChanges(InventoryChanges.newBuilder().setBaseGeneration(7).addVolumes(volume("old", 3))).build());
        assertEquals(3, index.volumes("old").getFirst().item().getCapacityBytes());
    }

    @Test
    void changesOnTopOfAnotherGenerationAskForEverything() {
        index.report(everything("n1", 3, List.of(volume("v", 1)), List.of()));
        assertTrue(index.report(RegisterRequest.newBuilder().setNodeId("n1").setInstance("i-n1").setGeneration(9)
                .setChanges(InventoryChanges.newBuilder().setBaseGeneration(4).addVolumes(volume("w", 1))).build()));
        assertTrue(index.volumes("w").isEmpty());
        // Another agent process: incomplete until it sends everything.
        assertTrue(index.report(RegisterRequest.newBuilder().setNodeId("n1").setInstance("other").setGeneration(0).build()));
        assertFalse(index.complete("n1"));
    }

    /** A restarted agent process counts its generations from 0: the entries of the process before never outrank its reports. */
    @Test
    void anotherAgentProcessesFirstReportDecidesAndKeepsWhatThisControllerMade() {
        index.report(everything("n1", 40, List.of(volume("kept", 1), volume("gone", 1)), List.of()));
        index.volume("n1", "made", volume("made", 1), 41);
        index.report(RegisterRequest.newBuilder().setNodeId("n1").setInstance("restarted").setGeneration(2)
                .setInventory(Inventory.newBuilder().addVolumes(volume("kept", 2)).addVolumes(volume("made", 1))).build());
        assertEquals(List.of("n1/kept", "n1/made"), page("", 10), "the old process's entry at generation 40 is no longer listed");
        assertEquals(2, index.volumes("kept").getFirst().item().getCapacityBytes());
        assertTrue(index.volumes("made").getFirst().made(), "still this controller's");
    }

    @Test
    void aNameOnTwoNodesIsFoundOnBothUntilOneLetsItGo() {
        index.report(everything("n1", 1, List.of(volume("v", 1)), List.of()));
        index.report(everything("n2", 1, List.of(volume("v", 2)), List.of()));
        assertEquals(List.of("n1", "n2"), index.volumes("v").stream().map(VolumeIndex.Located::nodeId).sorted().toList());
        index.report(everything("n1", 2, List.of(), List.of()));
        assertEquals(List.of("n2"), index.volumes("v").stream().map(VolumeIndex.Located::nodeId).toList());
        index.forget("n2");
        assertTrue(index.volumes("v").isEmpty());
        assertEquals(List.of(), page("", 10));
    }

    @Test
    void snapshotsArePagedAndListedPerNode() {
        Snapshot s1 = Snapshot.newBuilder().setName("s1").setSourceVolume("v").setCapacityBytes(5).build();
        Snapshot s2 = Snapshot.newBuilder().setName("s2").setSourceVolume("w").setCapacityBytes(6).build();
        index.report(everything("n1", 1, List.of(), List.of(s2, s1)));
        index.report(everything("n10", 1, List.of(), List.of(s1.toBuilder().setName("s3").build())));
        assertEquals(List.of(s1, s2), index.snapshotsOf("n1"));
        assertEquals(List.of("n1/s2", "n10/s3"), index.snapshotsFrom("n1/s2", 5).stream()
                .map(found -> found.nodeId() + "/" + found.item().getName()).toList());
        index.snapshot("n1", "s1", null, 2);
        assertTrue(index.snapshots("s1").isEmpty());
    }

    private static Snapshot copy(String name, String origin) {
        return Snapshot.newBuilder().setName(name).setOriginNode(origin).build();
    }

    /** Copies of a snapshot on other nodes are found by its origin and listed in the order of the origin's ids, while their nodes report them. */
    @Test
    void copiesAreFoundByTheirOriginAndListedInItsOrder() {
        index.report(everything("a", 1, List.of(), List.of(Snapshot.newBuilder().setName("s1").build(), copy("s0", "c"))));
        index.report(everything("b", 1, List.of(), List.of(copy("s1", "a"), copy("s2", "a"))));
        index.report(everything("c", 1, List.of(), List.of(copy("s1", "a"))));
        assertEquals(List.of("b", "c"), index.copiesOf("a", "s1").stream().map(VolumeIndex.Located::nodeId).sorted().toList());
        assertEquals(List.of(), index.copiesOf("b", "s1"), "a copy's origin is the node that took it");
        assertEquals(List.of(new VolumeIndex.SnapshotKey("a", "s1"), new VolumeIndex.SnapshotKey("a", "s2"),
                new VolumeIndex.SnapshotKey("c", "s0")), index.copiedFrom("", 10));
        assertEquals(List.of(new VolumeIndex.SnapshotKey("a", "s2")), index.copiedFrom("a/s1\0", 1));

        index.report(everything("b", 2, List.of(), List.of(copy("s1", "a"))));
        index.snapshot("c", "s1", null, 2);
        assertEquals(List.of(new VolumeIndex.SnapshotKey("a", "s1"), new VolumeIndex.SnapshotKey("c", "s0")), index.copiedFrom("", 10));
        assertEquals(List.of("b"), index.copiesOf("a", "s1").stream().map(VolumeIndex.Located::nodeId).toList());
    }

    /** Tombstones come with the inventory and its changes, and a controller's own deletion removes one at once. */
    @Test
    void tombstonesFollowTheReports() {
        SnapshotTombstone tombstone = SnapshotTombstone.newBuilder().setName("s1").setOriginNode("a").addNodes("b").build();
        index.report(everything("a", 1, List.of(), List.of()).toBuilder()
                .setInventory(Inventory.newBuilder().addTombstones(tombstone)).build());
        assertEquals(List.of(tombstone), index.tombstones("s1").stream().map(VolumeIndex.Located::item).toList());
        assertEquals("a", index.tombstones().getFirst().nodeId());

        index.report(RegisterRequest.newBuilder().setNodeId("a").setInstance("i-a").setGeneration(2)
                .setChanges(InventoryChanges.newBuilder().setBaseGeneration(1).addRemovedTombstones("s1")).build());
        assertEquals(List.of(), index.tombstones());

        index.tombstone("a", "s2", tombstone.toBuilder().setName("s2").build(), 3);
        index.report(everything("a", 2, List.of(), List.of())); // older than the deletion's answer: kept
        assertEquals(1, index.tombstones("s2").size());
        index.tombstone("a", "s2", null, 4);
        assertEquals(List.of(), index.tombstones());
    }
}
