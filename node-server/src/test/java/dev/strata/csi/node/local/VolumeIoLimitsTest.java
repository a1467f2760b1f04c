package dev.strata.csi.node.local;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.agent.api.Allocation;
import dev.strata.csi.agent.api.Volume;
import dev.strata.csi.agent.api.IoLimits;
import dev.strata.csi.linux.Kernel;
import dev.strata.csi.log.Log;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.cgroup.DeviceLimits;
import dev.strata.csi.node.cgroup.InMemoryPodCgroups;
import dev.strata.csi.node.cgroup.PodUid;
import dev.strata.csi.node.cgroup.SystemPodCgroups;
import dev.strata.csi.node.local.fs.InMemoryFilesystems;
import dev.strata.csi.node.local.fs.SystemFilesystemFreezer;
import dev.strata.csi.node.local.image.InMemoryImageFiles;
import dev.strata.csi.node.local.image.InMemoryLoopDevices;
import dev.strata.csi.node.local.image.LoopDevice;
import dev.strata.csi.node.local.pool.ImagePool;
import dev.strata.csi.node.local.pool.NodePools;
import dev.strata.csi.node.local.pool.PlainVolumes;
import dev.strata.csi.node.mount.InMemoryMounter;
import dev.strata.csi.system.Crashes;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Which pods a volume's IO limits reach, and what a change does to them: a pool, its loop device
 * and mounts (a staging mount, pods' filesystem targets, a raw block target) and the pods'
 * cgroups, all in memory ({@link InMemoryLoopDevices}, {@link InMemoryMounter},
 * {@link InMemoryPodCgroups}); the limits on real devices: the system tests' IoLimitsTest.
 */
class VolumeIoLimitsTest {

    static final long MIB = 1L << 20;
    static final PodUid POD_A = new PodUid("aaaaaaaa-0000-4000-8000-000000000001");
    static final PodUid POD_B = new PodUid("bbbbbbbb-0000-4000-8000-000000000002");
    static final PodUid BLOCK_POD = new PodUid("cccccccc-0000-4000-8000-000000000003");
    static final PodUid LATER_POD = new PodUid("dddddddd-0000-4000-8000-000000000004");
    static final PodUid NO_CGROUP_POD = new PodUid("eeeeeeee-0000-4000-8000-000000000005");

    @TempDir
    Path dir;

    final Kernel kernel = new Kernel();
    final InMemoryMounter mounter = new InMemoryMounter();
    final InMemoryLoopDevices loops = new InMemoryLoopDevices(mounter);
    final InMemoryImageFiles files = new InMemoryImageFiles(1L << 30);
    final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    final Log log = new Log(new PrintStream(logged, true), 0);
    final InMemoryPodCgroups cgroups = new InMemoryPodCgroups();
    final PrometheusRegistry metrics = new PrometheusRegistry();

    Path kubelet;
    ImagePool pool;
    VolumeIoLimits limits;
    DeviceNumber device;

    @BeforeEach
    void publishedToPods() throws Exception {
        kubelet = Files.createDirectories(dir.resolve("kubelet")).toRealPath();
        pool = new ImagePool(Files.createDirectories(dir.resolve("pool")), files,
                loops, mounter, new SystemFilesystemFreezer(kernel), Crashes.none(), Clock.systemUTC(), log);
        limits = new VolumeIoLimits(new NodePools(pool, Optional.empty()), mounter, kubelet, cgroups, metrics, log);
        PlainVolumes.create(pool, "pvc-a", 16 * MIB, Allocation.SPARSE, Optional.empty());
        pool.attach("pvc-a", "node-a");
        LoopDevice loop = loops.find(pool.imagePath("pvc-a")).orElseThrow();
        device = loop.number();
        new InMemoryFilesystems(loops, mounter).formatIfBlank(loop.device(), "ext4");
        Path staging = Files.createDirectories(kubelet.resolve("plugins/kubernetes.io/csi/strata.csi.dev/0a1b/globalmount"));
        mounter.mount(loop.device().toString(), staging, "ext4", List.of());
        for (PodUid pod : List.of(POD_A, POD_B, NO_CGROUP_POD)) {
            mounter.bindMount(staging, Files.createDirectories(target(pod)), false);
        }
        Path blockTarget = kubelet.resolve("plugins/kubernetes.io/csi/volumeDevices/publish/pvc-a/" + BLOCK_POD);
        Files.createDirectories(blockTarget.getParent());
        Files.createFile(blockTarget);
        mounter.bindMount(loop.device(), blockTarget, false);
        for (PodUid pod : List.of(POD_A, POD_B, BLOCK_POD, LATER_POD)) {
            cgroups.addPod(pod);
        }
    }

    Path target(PodUid pod) {
        return kubelet.resolve("pods/" + pod + "/volumes/kubernetes.io~csi/pvc-a/mount");
    }

    @Test
    void aLimitReachesEveryPodTheVolumeIsPublishedToAndOnlyThose() throws Exception {
        Volume image = limits.set("pvc-a", IoLimits.newBuilder().setWriteBytesPerSecond(MIB).build());
        assertEquals(IoLimits.newBuilder().setWriteBytesPerSecond(MIB).build(), image.getIoLimits());
        DeviceLimits wanted = new DeviceLimits(0, 0, 0, MIB);
        for (PodUid pod : List.of(POD_A, POD_B, BLOCK_POD)) {
            assertEquals(wanted, cgroups.of(pod, device), pod.toString());
        }
        assertEquals(DeviceLimits.NONE, cgroups.of(LATER_POD, device), "not published to that pod");
        assertEquals(3, cgroups.writes(), "the staging mount and the pod without a cgroup are no pods to limit");
        assertEquals(Map.of("pvc-a", 3.0), limitedPods());
        assertEquals(Map.of("pvc-a", 1.0), pods("strata_volume_io_unlimited_pods"), "the pod without a cgroup runs unthrottled");
        // The record keeps them: a pool that reads the records afresh (a restart) has them.
        ImagePool again = new ImagePool(pool.dir(), files, loops,
                mounter, new SystemFilesystemFreezer(kernel), Crashes.none(), Clock.systemUTC(), log);
        assertEquals(MIB, again.content("pvc-a").getIoLimits().getWriteBytesPerSecond());
    }

    @Test
    void aChangeKeepsTheLimitsItDoesNotNameAndZeroRemovesOne() throws Exception {
        limits.set("pvc-a", IoLimits.newBuilder().setWriteBytesPerSecond(MIB).setReadIops(100).build());
        limits.set("pvc-a", IoLimits.newBuilder().setReadIops(50).build());
        assertEquals(new DeviceLimits(50, 0, 0, MIB), cgroups.of(POD_A, device));
        Volume image = limits.set("pvc-a", IoLimits.newBuilder().setWriteBytesPerSecond(0).build());
        assertEquals(IoLimits.newBuilder().setReadIops(50).build(), image.getIoLimits());
        assertEquals(new DeviceLimits(50, 0, 0, 0), cgroups.of(POD_A, device));
        limits.set("pvc-a", IoLimits.newBuilder().setReadIops(0).build());
        assertEquals(DeviceLimits.NONE, cgroups.of(BLOCK_POD, device), "no limit left: no rule left");
        assertEquals(IoLimits.getDefaultInstance(), pool.get("pvc-a").orElseThrow().getIoLimits());
        assertEquals(Map.of(), limitedPods(), "no pod is limited any more");
    }

    @Test
    void aVolumeThatNeverHadLimitsTouchesNoCgroup() throws Exception {
        limits.applyAt("pvc-a", target(POD_A));
        limits.applyAll();
        assertEquals(0, cgroups.writes());
        assertEquals(Map.of(), limitedPods());
    }

    @Test
    void theSameChangeAgainLeavesTheSameState() throws Exception {
        IoLimits change = IoLimits.newBuilder().setWriteIops(200).build();
        Volume first = limits.set("pvc-a", change);
        Volume second = limits.set("pvc-a", change);
        assertEquals(first, second);
        assertEquals(new DeviceLimits(0, 200, 0, 0), cgroups.of(POD_B, device));
    }

    @Test
    void aPodPublishedLaterGetsTheLimitsAtItsPublishAndAtTheNextPass() throws Exception {
        limits.set("pvc-a", IoLimits.newBuilder().setReadBytesPerSecond(2 * MIB).build());
        Path later = Files.createDirectories(target(LATER_POD));
        mounter.bindMount(kubelet.resolve("pods/" + POD_A + "/volumes/kubernetes.io~csi/pvc-a/mount"), later, false);
        limits.applyAt("pvc-a", later);
        assertEquals(new DeviceLimits(0, 0, 2 * MIB, 0), cgroups.of(LATER_POD, device));
        assertEquals(Map.of("pvc-a", 4.0), limitedPods());

        // The pod's cgroup is made again (a pod restarted on the node, a container on cgroup v1): the pass brings it back.
        cgroups.removePod(POD_B);
        cgroups.addPod(POD_B);
        limits.applyAll();
        assertEquals(new DeviceLimits(0, 0, 2 * MIB, 0), cgroups.of(POD_B, device));
    }

    @Test
    void aPodWhoseCgroupRefusesIsLoggedAndCountedAndTheOthersAreLimited() throws Exception {
        cgroups.failFor(POD_B);
        limits.set("pvc-a", IoLimits.newBuilder().setWriteIops(10).build());
        assertEquals(new DeviceLimits(0, 10, 0, 0), cgroups.of(POD_A, device));
        assertEquals(new DeviceLimits(0, 10, 0, 0), cgroups.of(BLOCK_POD, device));
        assertEquals(1.0, ((CounterSnapshot) snapshot("strata_io_limit_failures")).getDataPoints().getFirst().getValue());
        assertTrue(logged.toString().contains("io controller is not enabled"), logged.toString());
        assertEquals(Map.of("pvc-a", 2.0), limitedPods());
    }

    /**
     * A pod whose cgroup is not found (kubelet with cgroupsPerQOS: false makes none) gets no limits:
     * one WARN line names it and the volume, and the gauge counts it until it has a cgroup that
     * holds them; a pass that finds it again repeats no warning.
     */
    @Test
    void aPodWithoutACgroupIsWarnedAboutOnceAndCountedUntilItsCgroupHoldsTheLimits() throws Exception {
        limits.set("pvc-a", IoLimits.newBuilder().setWriteBytesPerSecond(2 * MIB).build());
        limits.applyAll();
        limits.applyAt("pvc-a", target(NO_CGROUP_POD));
        assertEquals(1, warnings(NO_CGROUP_POD), logged.toString());
        assertTrue(logged.toString().contains("volume=pvc-a"), logged.toString());
        assertEquals(Map.of("pvc-a", 1.0), pods("strata_volume_io_unlimited_pods"));

        cgroups.addPod(NO_CGROUP_POD);
        limits.applyAll();
        assertEquals(new DeviceLimits(0, 0, 0, 2 * MIB), cgroups.of(NO_CGROUP_POD, device));
        assertEquals(Map.of(), pods("strata_volume_io_unlimited_pods"));
        assertEquals(Map.of("pvc-a", 4.0), limitedPods());
        assertTrue(logged.toString().contains("IO limits now applied"), logged.toString());
    }

    /** Removing the limits leaves nothing to apply: a pod without a cgroup is then no concern. */
    @Test
    void aVolumeWhoseLimitsAreRemovedCountsNoPodUnlimited() throws Exception {
        limits.set("pvc-a", IoLimits.newBuilder().setReadIops(10).build());
        limits.set("pvc-a", IoLimits.newBuilder().setReadIops(0).build());
        limits.applyAt("pvc-a", target(NO_CGROUP_POD));
        assertEquals(Map.of(), pods("strata_volume_io_unlimited_pods"));
        assertEquals(1, warnings(NO_CGROUP_POD), "only while a limit was recorded");
    }

    /**
     * The same on the cgroup files of a node whose kubelet runs with cgroupsPerQOS: false: a cgroup
     * v2 root with the io controller where the containers sit in the runtime's own slice, and no
     * kubepods hierarchy ({@link SystemPodCgroups} on a copy of that layout).
     */
    @Test
    void onANodeWithoutPodCgroupsEveryPodIsReportedUnlimited() throws Exception {
        Path root = Files.createDirectories(dir.resolve("cgroup"));
        Files.writeString(root.resolve("cgroup.controllers"), "cpu io memory pids\n");
        Files.createDirectories(root.resolve("system.slice/containerd.service"));
        PrometheusRegistry registry = new PrometheusRegistry();
        VolumeIoLimits node = new VolumeIoLimits(new NodePools(pool, Optional.empty()), mounter, kubelet,
                new SystemPodCgroups(root), registry, log);
        node.set("pvc-a", IoLimits.newBuilder().setWriteBytesPerSecond(2 * MIB).build());
        for (PodUid pod : List.of(POD_A, POD_B, BLOCK_POD, NO_CGROUP_POD)) {
            assertEquals(1, warnings(pod), pod + ": " + logged);
        }
        assertEquals(Map.of("pvc-a", 4.0), pods(registry, "strata_volume_io_unlimited_pods"));
        assertEquals(Map.of(), pods(registry, "strata_volume_io_limited_pods"));
        try (var files = Files.walk(root)) {
            assertEquals(List.of(), files.filter(file -> file.endsWith("io.max")).toList(), "no file is made");
        }
    }

    private long warnings(PodUid pod) {
        return logged.toString().lines()
                .filter(line -> line.contains("level=WARN") && line.contains("IO limits recorded but not applied") && line.contains(pod.toString()))
                .count();
    }

    private Map<String, Double> limitedPods() {
        return pods("strata_volume_io_limited_pods");
    }

    private Map<String, Double> pods(String gauge) {
        return pods(metrics, gauge);
    }

    private static Map<String, Double> pods(PrometheusRegistry registry, String gauge) {
        Map<String, Double> pods = new TreeMap<>();
        registry.scrape().stream().filter(s -> s.getMetadata().getName().equals(gauge)).findFirst()
                .map(GaugeSnapshot.class::cast).orElseThrow().getDataPoints()
                .forEach(point -> pods.put(point.getLabels().get("volume"), point.getValue()));
        return pods;
    }

    private io.prometheus.metrics.model.snapshots.MetricSnapshot snapshot(String name) {
        return metrics.scrape().stream().filter(s -> s.getMetadata().getName().equals(name)).findFirst().orElseThrow();
    }
}
