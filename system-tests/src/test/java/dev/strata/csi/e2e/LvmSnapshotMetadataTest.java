package dev.strata.csi.e2e;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import dev.strata.csi.testing.TestVolumeGroup;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * SnapshotMetadataTest's pattern on the LVM pool: thin snapshots of a block volume on node-a (a
 * volume group of the test's own with a thin pool, no image pool), the ranges from thin_dump and
 * thin_delta on the thin pool's metadata snapshot, relayed by controller-server; every block
 * written is in the delta, nothing farther than a chunk (64 KiB) from one. Needs device-mapper:
 * hack/lvm-vm.sh runs it in a VM (STRATA_TEST_LVM=required there); elsewhere it is skipped.
 */
@Tag("root")
class LvmSnapshotMetadataTest {

    private static final long CHUNK = 64 * 1024;

    @TempDir
    static Path dir;

    static TestVolumeGroup group;
    static Cluster cluster;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        group = TestVolumeGroup.make(dir, "strata-cbt-" + ProcessHandle.current().pid(), "1G", "512m");
        // lvm2's commands take seconds in an emulated VM: calls to agents get a longer deadline than --agent-call-timeout's 5 s.
        cluster = Cluster.start(dir.resolve("cluster"), List.of("--agent-plaintext", "true"), List.of("--agent-call-timeout", "120s"),
                Map.of());
        cluster.startNode("node-a", Cluster.Launch.HOST.with(Map.of("VOLUME_GROUP", group.name(), "THIN_POOL", TestVolumeGroup.THIN_POOL,
                "IMAGE_POOL", "false")));
        PipelineTest.cluster = cluster;
    }

    @AfterAll
    static void stop() throws Exception {
        PipelineTest.cluster = null;
        SnapshotTest.cluster = null;
        if (cluster != null) {
            cluster.close();
        }
        SystemState.cleanUp(dir.resolve("cluster"));
        if (group != null) {
            group.close();
        }
    }

    @Test
    void thinSnapshotsAnswerFromThePoolsMetadataWithEveryChangedBlock() throws Exception {
        long start = System.nanoTime();
        List<SnapshotMetadataTest.Range> changed = SnapshotMetadataTest.knownBlocksBetweenTwoSnapshots(cluster, "node-a",
                LvmPipelineTest.THIN, CHUNK, (base, target) -> Optional.empty());
        assertEquals(List.of(), group.driverVolumes(), "the test left logical volumes behind");
        System.out.printf("lvm: snapshot metadata of thin snapshots through the CSI calls: delta %d ranges, %d bytes, %.0f s in all%n",
                changed.size(), changed.stream().mapToLong(SnapshotMetadataTest.Range::length).sum(), (System.nanoTime() - start) / 1e9);
    }
}
