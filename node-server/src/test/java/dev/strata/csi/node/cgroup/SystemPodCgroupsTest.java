package dev.strata.csi.node.cgroup;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.testing.Root;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Where the limits go and what is written, for each layout kubelet makes: on a copy of the layout
 * in a temporary directory (the files as the kernel offers them; this machine has no cgroup v2
 * io controller), and on this machine's real cgroup v1 blkio hierarchy, which checks the lines.
 */
@Tag("root")
class SystemPodCgroupsTest {

    static final String UID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0";
    static final PodUid POD = new PodUid(UID);
    static final DeviceNumber LOOP = new DeviceNumber(7, 42);
    static final DeviceLimits LIMITS = new DeviceLimits(100, 200, 1 << 20, 2 << 20);

    static final List<String> V1_FILES = List.of("blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device",
            "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device");

    @TempDir
    Path root;

    /** Every cgroup driver and QoS class; the UID as that driver writes it. */
    static final List<String> POD_CGROUPS = List.of(
            "kubepods/pod" + UID,
            "kubepods/burstable/pod" + UID,
            "kubepods/besteffort/pod" + UID,
            "kubepods.slice/kubepods-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice",
            "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice",
            "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0.slice");

    @ParameterizedTest
    @ValueSource(ints = {0, 1, 2, 3, 4, 5})
    void v2TheLimitsGoIntoThePodCgroupsIoMax(int layout) throws Exception {
        Files.writeString(root.resolve("cgroup.controllers"), "cpu io memory pids\n");
        Path pod = Files.createDirectories(root.resolve(POD_CGROUPS.get(layout)));
        Files.writeString(pod.resolve("io.max"), "");
        Path container = Files.createDirectories(pod.resolve("cri-containerd-0123.scope"));

        assertTrue(new SystemPodCgroups(root).limit(POD, LOOP, LIMITS));
        assertEquals("7:42 rbps=1048576 wbps=2097152 riops=100 wiops=200\n", Files.readString(pod.resolve("io.max")));
        assertFalse(Files.exists(container.resolve("io.max")), "v2 limits the pod's cgroup, hierarchically: nothing below");

        assertTrue(new SystemPodCgroups(root).limit(POD, LOOP, new DeviceLimits(0, 0, 0, 5)));
        assertEquals("7:42 rbps=max wbps=5 riops=max wiops=max\n", Files.readString(pod.resolve("io.max")));
    }

    @ParameterizedTest
    @ValueSource(ints = {0, 1, 2, 3, 4, 5})
    void v1TheLimitsGoIntoThePodsAndEachContainersBlkioCgroup(int layout) throws Exception {
        Path pod = Files.createDirectories(root.resolve("blkio").resolve(POD_CGROUPS.get(layout)));
        Path container = Files.createDirectories(pod.resolve("0123abcd"));
        for (Path cgroup : List.of(pod, container)) {
            for (String file : V1_FILES) {
                Files.writeString(cgroup.resolve(file), "");
            }
        }
        assertTrue(new SystemPodCgroups(root).limit(POD, LOOP, LIMITS));
        for (Path cgroup : List.of(pod, container)) {
            assertEquals("7:42 100\n", Files.readString(cgroup.resolve("blkio.throttle.read_iops_device")));
            assertEquals("7:42 200\n", Files.readString(cgroup.resolve("blkio.throttle.write_iops_device")));
            assertEquals("7:42 1048576\n", Files.readString(cgroup.resolve("blkio.throttle.read_bps_device")));
            assertEquals("7:42 2097152\n", Files.readString(cgroup.resolve("blkio.throttle.write_bps_device")));
        }
    }

    @Test
    void aPodWithoutACgroupHereIsNotLimitedAndNothingIsMade() throws Exception {
        Files.createDirectories(root.resolve("blkio/kubepods/burstable"));
        assertFalse(new SystemPodCgroups(root).limit(POD, LOOP, LIMITS));
        assertEquals(List.of(root.resolve("blkio/kubepods/burstable")), Files.list(root.resolve("blkio/kubepods")).toList());
        assertEquals(0, Files.list(root.resolve("blkio/kubepods/burstable")).count());
    }

    @Test
    void noHierarchyWithIoLimitsIsAnError() throws Exception {
        IOException none = assertThrows(IOException.class, () -> new SystemPodCgroups(root).limit(POD, LOOP, LIMITS));
        assertTrue(none.getMessage().contains("neither cgroup v2"), none.getMessage());
        Files.writeString(root.resolve("cgroup.controllers"), "cpu memory pids\n");
        Files.createDirectories(root.resolve(POD_CGROUPS.get(1)));
        IOException noIo = assertThrows(IOException.class, () -> new SystemPodCgroups(root).limit(POD, LOOP, LIMITS));
        assertTrue(noIo.getMessage().contains("io controller is not enabled"), noIo.getMessage());
        assertTrue(new SystemPodCgroups(root).limit(POD, LOOP, DeviceLimits.NONE), "no limit to remove where there can be none");
        assertFalse(Files.exists(root.resolve(POD_CGROUPS.get(1)).resolve("io.max")), "and no file is made");
    }

    /** The kernel's own files: it takes the lines, shows them back, and removes a rule for 0. */
    @Test
    void v1TheKernelTakesTheLinesAndZeroRemovesTheRule() throws Exception {
        Root.require();
        Path blkio = Path.of("/sys/fs/cgroup/blkio");
        if (!Files.isDirectory(blkio) || !Files.exists(blkio.resolve("blkio.throttle.write_bps_device"))) {
            throw new org.opentest4j.TestAbortedException("this machine has no cgroup v1 blkio hierarchy with throttling");
        }
        Path testRoot = Files.createSymbolicLink(root.resolve("blkio"), Files.createDirectory(blkio.resolve("strata-test-" + UUID.randomUUID())));
        Path pod = Files.createDirectories(testRoot.resolve("kubepods/burstable/pod" + UID));
        Path container = Files.createDirectory(pod.resolve("0123abcd"));
        DeviceNumber loop0 = new DeviceNumber(7, 0); // a loop device the kernel knows; rules name existing devices only
        try {
            assertTrue(new SystemPodCgroups(root).limit(POD, loop0, LIMITS));
            for (Path cgroup : List.of(pod, container)) {
                assertEquals("7:0 200\n", Files.readString(cgroup.resolve("blkio.throttle.write_iops_device")));
                assertEquals("7:0 1048576\n", Files.readString(cgroup.resolve("blkio.throttle.read_bps_device")));
            }
            assertTrue(new SystemPodCgroups(root).limit(POD, loop0, new DeviceLimits(0, 0, 1 << 20, 0)));
            for (Path cgroup : List.of(pod, container)) {
                assertEquals("", Files.readString(cgroup.resolve("blkio.throttle.write_iops_device")));
                assertEquals("7:0 1048576\n", Files.readString(cgroup.resolve("blkio.throttle.read_bps_device")));
            }
        } finally {
            Path real = testRoot.toRealPath();
            for (Path cgroup : List.of(container, pod, pod.getParent(), pod.getParent().getParent())) {
                Files.delete(real.resolve(testRoot.relativize(cgroup)));
            }
            Files.delete(real);
        }
    }
}
