package dev.strata.csi.e2e;

import static dev.strata.csi.e2e.PipelineTest.MIB;
import static dev.strata.csi.e2e.PipelineTest.mount;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import csi.v1.Csi.CreateVolumeGroupSnapshotRequest;
import csi.v1.Csi.Snapshot;
import csi.v1.Csi.VolumeGroupSnapshot;
import dev.strata.csi.testing.LoopFilesystem;
import dev.strata.csi.testing.Root;
import dev.strata.csi.testing.SystemState;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a group snapshot is for, under load: a writer process writes sequence number n to volume
 * A, fsyncs, then n to volume B, fsyncs, in a loop; so at every moment B holds A's number or the
 * one before. Each snapshot's content is read from the member's file in the pool (a read-only
 * loop mount, not the driver), and the pair must keep that invariant: in every group snapshot, on
 * one node and across two; single snapshots of A then B, for comparison, break it (the count is
 * printed). Then the freeze window of a group of 1, 4 and 16 volumes on one node with a reflink
 * pool. {@code -Dstrata.group.rounds} sets the number of snapshots of each kind (100).
 */
@Tag("root")
class GroupConsistencyTest {

    private static final int ROUNDS = Integer.getInteger("strata.group.rounds", 100);
    private static final Pattern WINDOW = Pattern.compile("group snapshot taken.*?group[=\\\" :]+([A-Za-z0-9._-]+).*?freeze_window_ms[=\\\" :]+([0-9.]+)");
    private static final Pattern CALL = Pattern.compile("msg=call method=\\S+/(\\S+) .*?duration_ms=([0-9.]+)");

    @TempDir
    static Path dir;

    static Cluster cluster;
    static LoopFilesystem xfsPool;

    @BeforeAll
    static void start() throws Exception {
        Root.require();
        xfsPool = LoopFilesystem.mount(dir.resolve("xfs-pool.img"), 2L << 30, dir.resolve("node-a/pool"), "-m", "reflink=1");
        // Debug on the nodes: each cut's timeline (every member's FIFREEZE, copy and FITHAW).
        cluster = Cluster.start(dir, List.of("--agent-plaintext", "true"), List.of(), Map.of("LOG_VERBOSITY", "5"), "node-a", "node-b");
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
        if (xfsPool != null) {
            xfsPool.close();
        }
        assertEquals(List.of(), SystemState.cleanUp(dir));
    }

    @Test
    void theWritersInvariantHoldsInEveryGroupSnapshotOnOneNodeAndAcrossTwo() throws Exception {
        for (String nodeOfB : List.of("node-a", "node-b")) {
            SnapshotTest.Published a = SnapshotTest.publish("node-a", SnapshotTest.create("pvc-seq-a-" + nodeOfB, 32 * MIB, mount("ext4"),
                    "node-a", null), mount("ext4"));
            SnapshotTest.Published b = SnapshotTest.publish(nodeOfB, SnapshotTest.create("pvc-seq-b-" + nodeOfB, 32 * MIB, mount("ext4"),
                    nodeOfB, null), mount("ext4"));
            Process writer = writer(a.target(), b.target());
            try {
                Thread.sleep(500);
                String where = nodeOfB.equals("node-a") ? "one node" : "two nodes";
                int groupBroken = 0;
                long lastA = 0;
                for (int i = 0; i < ROUNDS; i++) {
                    VolumeGroupSnapshot group = cluster.groupController().createVolumeGroupSnapshot(CreateVolumeGroupSnapshotRequest.newBuilder()
                            .setName("seq-" + nodeOfB + "-" + i).addSourceVolumeIds(a.volume().getVolumeId())
                            .addSourceVolumeIds(b.volume().getVolumeId()).build()).getGroupSnapshot();
                    long[] pair = {read(member(group, a)), read(member(group, b))};
                    if (!(pair[1] == pair[0] || pair[1] == pair[0] - 1)) {
                        groupBroken++;
                        System.out.printf("group snapshot %d (%s): A=%d B=%d%n", i, where, pair[0], pair[1]);
                    }
                    lastA = pair[0];
                    GroupSnapshotTest.deleteGroup(group);
                }
                int singleBroken = 0;
                for (int i = 0; i < ROUNDS; i++) {
                    Snapshot sa = SnapshotTest.snapshot("seq-single-a-" + nodeOfB + "-" + i, a.volume());
                    Snapshot sb = SnapshotTest.snapshot("seq-single-b-" + nodeOfB + "-" + i, b.volume());
                    long va = read(sa, a.node());
                    long vb = read(sb, b.node());
                    if (!(vb == va || vb == va - 1)) {
                        singleBroken++;
                    }
                    SnapshotTest.deleteSnapshot(sa);
                    SnapshotTest.deleteSnapshot(sb);
                }
                assertTrue(writer.isAlive(), "the writer ran throughout");
                System.out.printf("group snapshots under load (%s): the invariant held in %d of %d (the writer at %d); "
                        + "single snapshots of A then B: broken in %d of %d%n", where, ROUNDS - groupBroken, ROUNDS, lastA, singleBroken, ROUNDS);
                System.out.printf("the slowest agent calls (%s): %s%n", where, slowestCalls());
                assertEquals(0, groupBroken, "group snapshots that broke the writer's invariant (" + where + ")");
                assertTrue(lastA > 0, "the writer wrote");
            } finally {
                cluster.controllerProcess().output().lines().filter(l -> l.contains("did not answer within the call deadline"))
                        .forEach(System.out::println);
                stopWriter(writer);
            }
            SnapshotTest.delete(a);
            SnapshotTest.delete(b);
        }
    }

    /**
     * The writer: n to {@code a}'s file seq (written aside and renamed), fsync, n to {@code b}'s,
     * fsync, for n = 1, 2, ... In a session of its own: {@link #stopWriter} kills the whole of it,
     * its mv and sync too.
     */
    static Process writer(Path a, Path b) throws Exception {
        return new ProcessBuilder("setsid", "sh", "-c", "n=0; while :; do n=$((n+1)); "
                + "printf '%d\\n' $n > \"$1/.seq\" && mv \"$1/.seq\" \"$1/seq\" && sync \"$1/seq\" && "
                + "printf '%d\\n' $n > \"$2/.seq\" && mv \"$2/.seq\" \"$2/seq\" && sync \"$2/seq\"; done",
                "writer", a.toString(), b.toString()).redirectErrorStream(true).start();
    }

    static void stopWriter(Process writer) throws Exception {
        SystemState.run("kill", "-KILL", "--", "-" + writer.pid());
        writer.waitFor(10, TimeUnit.SECONDS);
        while (!SystemState.run("pgrep", "-g", String.valueOf(writer.pid())).isBlank()) {
            Thread.sleep(50);
        }
    }

    /** The freeze window of a group of 1, 4 and 16 mounted volumes on node-a (a reflink pool), as controller-server logs it. */
    @Test
    void freezeWindowOfOneFourAndSixteenVolumes() throws Exception {
        List<SnapshotTest.Published> volumes = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            SnapshotTest.Published p = SnapshotTest.publish("node-a", SnapshotTest.create("pvc-window-" + i, 32 * MIB, mount("ext4"),
                    "node-a", null), mount("ext4"));
            VolumeData.write(p.target().resolve("data"), MIB);
            volumes.add(p);
        }
        List<Integer> sizes = List.of(1, 4, 16);
        List<List<Double>> windows = sizes.stream().map(size -> (List<Double>) new ArrayList<Double>()).toList();
        // The sizes in turn, round after round: a change of the machine's load touches each alike.
        for (int round = 0; round < 5; round++) {
            for (int k = 0; k < sizes.size(); k++) {
                String name = "window-" + sizes.get(k) + "-" + round;
                var request = CreateVolumeGroupSnapshotRequest.newBuilder().setName(name);
                volumes.subList(0, sizes.get(k)).forEach(p -> request.addSourceVolumeIds(p.volume().getVolumeId()));
                VolumeGroupSnapshot group = cluster.groupController().createVolumeGroupSnapshot(request.build()).getGroupSnapshot();
                windows.get(k).add(window(cluster, name));
                GroupSnapshotTest.deleteGroup(group);
            }
        }
        StringBuilder line = new StringBuilder("group snapshot freeze window on one node (reflink pool, median of 5):");
        double[] medians = new double[sizes.size()];
        for (int k = 0; k < sizes.size(); k++) {
            Collections.sort(windows.get(k));
            medians[k] = windows.get(k).get(2);
            line.append(String.format(" %d volumes %.1f ms (%s);", sizes.get(k), medians[k], windows.get(k)));
        }
        System.out.println(line.append(String.format(" 16 / 1 = %.2f", medians[2] / medians[0])));
        // Where a window's time goes, as node-a logs it: each member's FIFREEZE, copy and FITHAW.
        cluster.node("node-a").process().output().lines().filter(l -> l.contains("the cut's timeline") && l.contains("window-16-"))
                .forEach(System.out::println);
        for (SnapshotTest.Published p : volumes) {
            SnapshotTest.delete(p);
        }
    }

    /** Each node-server's slowest call of each method so far, slowest first: what a call deadline must allow. */
    private static String slowestCalls() {
        StringBuilder out = new StringBuilder();
        for (String node : List.of("node-a", "node-b")) {
            Map<String, Double> slowest = new HashMap<>();
            Matcher found = CALL.matcher(cluster.node(node).process().output());
            while (found.find()) {
                slowest.merge(found.group(1), Double.parseDouble(found.group(2)), Math::max);
            }
            out.append(node).append(' ').append(slowest.entrySet().stream().sorted(Map.Entry.<String, Double>comparingByValue().reversed())
                    .limit(5).map(call -> String.format("%s %.0f ms", call.getKey(), call.getValue())).toList()).append("; ");
        }
        return out.toString();
    }

    /** The freeze window of {@code group}, as the cluster's controller-server logged it. */
    static double window(Cluster cluster, String group) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            Matcher found = WINDOW.matcher(cluster.controllerProcess().output());
            while (found.find()) {
                if (found.group(1).equals(group)) {
                    return Double.parseDouble(found.group(2));
                }
            }
            Thread.sleep(50);
        }
        throw new AssertionError("no freeze window logged for " + group + ":\n" + cluster.controllerProcess().output());
    }

    private static Snapshot member(VolumeGroupSnapshot group, SnapshotTest.Published volume) {
        return group.getSnapshotsList().stream().filter(s -> s.getSourceVolumeId().equals(volume.volume().getVolumeId())).findFirst().orElseThrow();
    }

    private static long read(Snapshot member) throws Exception {
        return read(member, member.getSnapshotId().split("/")[1]);
    }

    /** The sequence number in the snapshot's file, read through a read-only loop mount of it: no journal replay. */
    private static long read(Snapshot snapshot, String node) throws Exception {
        String name = snapshot.getSnapshotId().substring(snapshot.getSnapshotId().lastIndexOf('/') + 1);
        Path image = cluster.node(node).pool().resolve("snapshots").resolve(name + ".img");
        Path at = Files.createDirectories(dir.resolve("read").resolve(name));
        String out = SystemState.run("mount", "-o", "ro,noload,loop", image.toString(), at.toString());
        try {
            Path seq = at.resolve("seq");
            assertTrue(Files.exists(seq), "snapshot " + name + " holds the sequence file: " + out);
            return Long.parseLong(Files.readString(seq).strip());
        } finally {
            SystemState.run("umount", at.toString());
        }
    }
}
