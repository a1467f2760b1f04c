package dev.strata.csi.node.cgroup;

import dev.strata.csi.mount.DeviceNumber;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The pods' cgroups under a cgroup root (the host's /sys/fs/cgroup, mounted into node-server's
 * container), where kubelet makes them with either cgroup driver and in every QoS class:
 *
 * <ul>
 *   <li>cgroupfs: {@code kubepods/pod<uid>} (Guaranteed), {@code kubepods/burstable/pod<uid>},
 *       {@code kubepods/besteffort/pod<uid>};</li>
 *   <li>systemd: {@code kubepods.slice/kubepods-pod<uid>.slice},
 *       {@code kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice}, and so
 *       for besteffort, the UID's '-' written '_'.</li>
 * </ul>
 *
 * On cgroup v2 (the root holds {@code cgroup.controllers}) the limits go into the pod cgroup's
 * {@code io.max}, which bounds every container below it together. On cgroup v1 they go into the
 * blkio hierarchy's {@code blkio.throttle.*_device} files, and there throttling is flat: a limit
 * applies to the processes of its own cgroup only, not to those of the cgroups below. So they are
 * written into the pod's cgroup and into each container cgroup under it, and each container has
 * the limits to itself; a container started later gets them at the next pass
 * ({@code VolumeIoLimits#applyAll}, every --io-limits-resync).
 */
public final class SystemPodCgroups implements PodCgroups {

    private static final String IO_MAX = "io.max";

    private final Path root;

    public SystemPodCgroups(Path root) {
        this.root = root;
    }

    @Override
    public boolean limit(PodUid pod, DeviceNumber device, DeviceLimits limits) throws IOException {
        if (Files.exists(root.resolve("cgroup.controllers"))) {
            Optional<Path> cgroup = podCgroup(root, pod);
            if (cgroup.isEmpty()) {
                return false;
            }
            Path ioMax = cgroup.get().resolve(IO_MAX);
            if (!Files.exists(ioMax) && limits.none()) {
                return true; // without the io controller the pod has no limit: nothing to remove
            }
            if (!Files.exists(ioMax)) {
                throw new IOException("pod cgroup " + cgroup.get() + " has no " + IO_MAX
                        + ": the io controller is not enabled for kubelet's pod cgroups");
            }
            write(ioMax, device + " rbps=" + v2(limits.readBytesPerSecond()) + " wbps=" + v2(limits.writeBytesPerSecond())
                    + " riops=" + v2(limits.readIops()) + " wiops=" + v2(limits.writeIops()));
            return true;
        }
        Path blkio = root.resolve("blkio");
        if (!Files.isDirectory(blkio)) {
            throw new IOException("no cgroup hierarchy with IO limits under " + root
                    + ": neither cgroup v2 (cgroup.controllers) nor cgroup v1's blkio");
        }
        Optional<Path> cgroup = podCgroup(blkio, pod);
        if (cgroup.isEmpty()) {
            return false;
        }
        writeV1(cgroup.get(), device, limits);
        for (Path container : children(cgroup.get())) {
            try {
                writeV1(container, device, limits);
            } catch (NoSuchFileException e) {
                // the container's cgroup went since the listing: nothing to limit
            }
        }
        return true;
    }

    /** The pod's cgroup under {@code base} (the v2 root, or v1's blkio hierarchy), whichever driver and QoS class made it. */
    static Optional<Path> podCgroup(Path base, PodUid pod) {
        String systemd = pod.systemdForm();
        List<Path> candidates = List.of(
                base.resolve("kubepods").resolve("pod" + pod.value()),
                base.resolve("kubepods/burstable").resolve("pod" + pod.value()),
                base.resolve("kubepods/besteffort").resolve("pod" + pod.value()),
                base.resolve("kubepods.slice").resolve("kubepods-pod" + systemd + ".slice"),
                base.resolve("kubepods.slice/kubepods-burstable.slice").resolve("kubepods-burstable-pod" + systemd + ".slice"),
                base.resolve("kubepods.slice/kubepods-besteffort.slice").resolve("kubepods-besteffort-pod" + systemd + ".slice"));
        return candidates.stream().filter(Files::isDirectory).findFirst();
    }

    private static List<Path> children(Path cgroup) throws IOException {
        List<Path> children = new ArrayList<>();
        try (DirectoryStream<Path> entries = Files.newDirectoryStream(cgroup, Files::isDirectory)) {
            entries.forEach(children::add);
        } catch (NoSuchFileException e) {
            // the pod went since it was found
        }
        return children;
    }

    /** The four throttle files; 0 removes a device's rule. */
    private static void writeV1(Path cgroup, DeviceNumber device, DeviceLimits limits) throws IOException {
        write(cgroup.resolve("blkio.throttle.read_iops_device"), device + " " + limits.readIops());
        write(cgroup.resolve("blkio.throttle.write_iops_device"), device + " " + limits.writeIops());
        write(cgroup.resolve("blkio.throttle.read_bps_device"), device + " " + limits.readBytesPerSecond());
        write(cgroup.resolve("blkio.throttle.write_bps_device"), device + " " + limits.writeBytesPerSecond());
    }

    private static String v2(long limit) {
        return limit == 0 ? "max" : Long.toString(limit);
    }

    /** One write of one line, as the kernel reads a cgroup file; never creates a file. */
    private static void write(Path file, String line) throws IOException {
        Files.writeString(file, line + "\n", StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
    }
}
