import csi.v1.Csi.CapacityRange;
import csi.v1.Csi.ControllerPublishVolumeRequest;
import csi.v1.Csi.ControllerUnpublishVolumeRequest;
import csi.v1.Csi.CreateVolumeRequest;
import csi.v1.Csi.DeleteVolumeRequest;
import csi.v1.Csi.NodePublishVolumeRequest;
import csi.v1.Csi.NodeStageVolumeRequest;
import csi.v1.Csi.NodeUnpublishVolumeRequest;
import csi.v1.Csi.NodeUnstageVolumeRequest;
import csi.v1.Csi.TopologyRequirement;
import csi.v1.Csi.VolumeCapability;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What a pod gets from a volume against what the pool's disk gives: fio (direct I/O, libaio) on a
 * file on the pool's own filesystem (the raw baseline: what a hostPath volume gets), on a file in
 * a filesystem volume (ext4) and on a block volume, both made by the real driver (controller-server
 * and a node-server started by {@link LocalCluster}, driven through create, attach, stage and
 * publish) and measured through the pod's target path. Every target is first measured once on
 * fresh blocks (random writes, nothing written there before), then written fully once; then each
 * job runs on each target in turn, the targets' order rotated every round, and the median of the
 * rounds is compared with the baseline of the target's kind: the raw file for filesystem targets,
 * the raw block device (when one is given, else the raw file) for block targets. The pool is a
 * filesystem of its own (a loop-mounted image with direct I/O, or a device the caller names), so
 * that other work on the machine's disk moves the figures as little as it can. Run through
 * hack/datapath-bench.sh (or hack/datapath-vm.sh), as root.
 *
 * <p>Arguments: repository, then key=value settings: size-mib (2048), rounds (3), runtime (10 s a
 * job), image-dir (/var/tmp: where the pool's image file goes), pool-device (a block device for the
 * pool's filesystem instead of an image; it is formatted), block-device (the raw block baseline; it
 * is overwritten), volume-group and thin-pool (an LVM pool for node-server: adds LVM targets, one
 * filesystem and one block volume for each of lvm-types, {@code thin} and/or {@code linear}),
 * experiments (hand-made block devices beside the driver's, to find what makes the image pool
 * faster: {@code loop-4k} a loop device with 4096-byte sectors, {@code written} over an image
 * written in full instead of fallocated, {@code queue} with the loop queue's settings changed,
 * {@code xfs-pool} over an image on xfs, on xfs-device, which is formatted; {@code thin-<chunk size>}
 * and {@code thin-<chunk size>-nozero} a thin volume in a thin pool of its own in volume-group, with
 * that chunk size, new chunks zeroed or not).
 */
public final class DatapathBench {

    private static final String NODE = "node-bench";
    private static final long MIB = 1L << 20;

    /** One fio job: how it reads and writes; 4k jobs are reported in IOPS, 1M jobs in MiB/s. */
    record Job(String name, String description, List<String> options, boolean iops) { }

    static final List<Job> JOBS = List.of(
            new Job("randread", "random read 4k, QD32", List.of("--rw=randread", "--bs=4k", "--iodepth=32"), true),
            new Job("randwrite", "random write 4k, QD32", List.of("--rw=randwrite", "--bs=4k", "--iodepth=32"), true),
            new Job("randrw-fsync", "random read/write 4k, QD1, fsync after each write",
                    List.of("--rw=randrw", "--bs=4k", "--iodepth=1", "--fsync=1"), true),
            new Job("seqread", "sequential read 1M, QD8", List.of("--rw=read", "--bs=1M", "--iodepth=8"), false),
            new Job("seqwrite", "sequential write 1M, QD8", List.of("--rw=write", "--bs=1M", "--iodepth=8"), false));

    /**
     * Where fio reads and writes: a file or a block device ({@code block}: compared with the block
     * baseline), and how to take it down afterwards (null for the baselines).
     */
    record Target(String name, boolean block, Path path, Release release) { }

    /** Undoes what made a target. */
    interface Release {
        void release() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        Path repo = Path.of(args[0]);
        Map<String, String> settings = new LinkedHashMap<>();
        for (int i = 1; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            if (pair.length == 2 && !pair[1].isEmpty()) {
                settings.put(pair[0], pair[1]);
            }
        }
        long size = Long.parseLong(settings.getOrDefault("size-mib", "2048")) * MIB;
        int rounds = Integer.parseInt(settings.getOrDefault("rounds", "3"));
        int runtime = Integer.parseInt(settings.getOrDefault("runtime", "10"));
        Path imageDir = Path.of(settings.getOrDefault("image-dir", "/var/tmp"));
        String poolDevice = settings.get("pool-device");
        String blockDevice = settings.get("block-device");
        String volumeGroup = settings.get("volume-group");
        List<String> lvmTypes = list(settings.getOrDefault("lvm-types", "thin"));
        List<String> experiments = list(settings.getOrDefault("experiments", ""));
        List<String> nodeFlags = new ArrayList<>();
        if (volumeGroup != null) {
            nodeFlags.addAll(List.of("--volume-group", volumeGroup));
            if (settings.containsKey("thin-pool")) {
                nodeFlags.addAll(List.of("--thin-pool", settings.get("thin-pool")));
            }
        }

        PoolFilesystem poolFilesystem = new PoolFilesystem(imageDir, poolDevice, 4 * size + 512 * MIB);
        try (LocalCluster cluster = LocalCluster.start(repo, LocalCluster.Jvm.deployed(repo), poolFilesystem::mount, nodeFlags, NODE)) {
            // Bench.machine() names the filesystem of /tmp as the pool's; this benchmark's pool is its own, named below.
            System.out.printf("machine: %s, %s memory; load average at the start %s%n", Bench.machine().replaceFirst(", pool on .*$", ""),
                    memory(), loadAverage());
            System.out.printf("pool filesystem: ext4 on %s, over %s%n", poolFilesystem.describe(), poolFilesystem.underlying());
            System.out.printf("fio %s, direct I/O, libaio; %d MiB a target; %d s a job, %d rounds, medians%n%n",
                    Bench.run("fio", "--version").strip(), size >> 20, runtime, rounds);
            List<Target> targets = new ArrayList<>();
            try {
                Path raw = cluster.pool(NODE).resolve("raw-baseline.fio");
                targets.add(new Target("raw", false, raw, () -> Files.deleteIfExists(raw)));
                if (blockDevice != null) {
                    targets.add(new Target("raw-block", true, Path.of(blockDevice), null));
                }
                targets.add(filesystemVolume(cluster, "filesystem", size, Map.of("allocation", "full")));
                targets.add(blockVolume(cluster, "block", size, Map.of("allocation", "full")));
                if (volumeGroup != null) {
                    for (String type : lvmTypes) {
                        Map<String, String> parameters = type.equals("thin") ? Map.of("pool", "lvm")
                                : Map.of("pool", "lvm", "lvType", type);
                        targets.add(filesystemVolume(cluster, "lvm-" + type + "-filesystem", size, parameters));
                        targets.add(blockVolume(cluster, "lvm-" + type + "-block", size, parameters));
                    }
                }
                for (String experiment : experiments) {
                    targets.add(Experiments.make(experiment, cluster.pool(NODE), settings.get("xfs-device"), volumeGroup, size));
                }
                // Fresh blocks: what a volume's first writes cost (a file's or an image's unwritten
                // extents converted, a thin pool's blocks provisioned), once per target.
                Map<String, Double> fresh = new LinkedHashMap<>();
                for (Target target : targets) {
                    fresh.put(target.name(), fio(target.path(), size, "fresh", JOBS.get(1).options(), runtime));
                }
                for (Target target : targets) {
                    long start = System.nanoTime();
                    fio(target.path(), size, "prefill", List.of("--rw=write", "--bs=1M", "--iodepth=8"), 0);
                    System.out.printf("written once: %-26s %s (%.1f s)%n", target.name(), target.path(),
                            (System.nanoTime() - start) / 1e9);
                }
                var results = measure(targets, size, rounds, runtime);
                report("Filesystem targets", results, fresh, targets.stream().filter(t -> !t.block()).toList());
                report("Block targets" + (blockDevice == null ? " (against the raw file: no block-device given)" : ""), results, fresh,
                        blockDevice == null ? targets.stream().filter(t -> t.name().equals("raw") || t.block()).toList()
                                : targets.stream().filter(Target::block).toList());
            } finally {
                for (Target target : targets.reversed()) {
                    try {
                        if (target.release() != null) {
                            target.release().release();
                        }
                    } catch (Exception e) {
                        System.out.printf("releasing %s failed: %s%n", target.name(), e.getMessage());
                    }
                }
            }
            // The pool's own filesystem is this benchmark's, not the driver's leftover.
            String poolMount = "mount " + cluster.pool(NODE);
            List<String> left = cluster.stopAndListLeftovers().stream()
                    .filter(entry -> !entry.endsWith("/lost+found") && !entry.equals(poolMount)).toList();
            System.out.printf("%nload average at the end %s; left behind by the driver: %s; the servers' logs: %s%n", loadAverage(),
                    left.isEmpty() ? "nothing" : left, cluster.work);
        } finally {
            poolFilesystem.unmount();
        }
    }

    /** results.get(job).get(target): the rounds' results, bytes per second read and written. */
    private static Map<String, Map<String, List<Double>>> measure(List<Target> targets, long size, int rounds, int runtime)
            throws Exception {
        Map<String, Map<String, List<Double>>> results = new LinkedHashMap<>();
        for (int round = 0; round < rounds; round++) {
            for (Job job : JOBS) {
                for (int i = 0; i < targets.size(); i++) {
                    Target target = targets.get((i + round) % targets.size());
                    double bytesPerSecond = fio(target.path(), size, job.name(), job.options(), runtime);
                    results.computeIfAbsent(job.name(), k -> new LinkedHashMap<>())
                            .computeIfAbsent(target.name(), k -> new ArrayList<>()).add(bytesPerSecond);
                }
            }
            System.out.printf("round %d of %d done, load average %s%n", round + 1, rounds, loadAverage());
        }
        return results;
    }

    /** A table of {@code targets}, the first of them the baseline the others are divided by. */
    private static void report(String title, Map<String, Map<String, List<Double>>> results, Map<String, Double> fresh,
            List<Target> targets) {
        StringBuilder header = new StringBuilder("| job |");
        StringBuilder rule = new StringBuilder("| --- |");
        for (Target target : targets) {
            header.append(' ').append(target.name()).append(" |");
            rule.append(" ---: |");
        }
        Target base = targets.getFirst();
        for (Target target : targets.subList(1, targets.size())) {
            header.append(' ').append(target.name()).append(" / ").append(base.name()).append(" |");
            rule.append(" ---: |");
        }
        System.out.println("\n" + title + "\n\n" + header + "\n" + rule);
        Map<String, Map<String, List<Double>>> rows = new LinkedHashMap<>();
        Map<String, Boolean> iops = new LinkedHashMap<>();
        for (Job job : JOBS) {
            rows.put(job.description(), results.get(job.name()));
            iops.put(job.description(), job.iops());
        }
        Map<String, List<Double>> freshRow = new LinkedHashMap<>();
        fresh.forEach((target, value) -> freshRow.put(target, List.of(value)));
        String freshJob = JOBS.get(1).description() + ", fresh blocks (once, before the first full write)";
        rows.put(freshJob, freshRow);
        iops.put(freshJob, true);
        rows.forEach((description, byTarget) -> {
            double raw = median(byTarget.get(base.name()));
            StringBuilder line = new StringBuilder("| " + description + " |");
            for (Target target : targets) {
                double value = median(byTarget.get(target.name()));
                line.append(iops.get(description) ? String.format(" %.0f IOPS |", value / 4096) : String.format(" %.0f MiB/s |", value / MIB));
            }
            for (Target target : targets.subList(1, targets.size())) {
                line.append(String.format(" %.2f |", median(byTarget.get(target.name())) / raw));
            }
            System.out.println(line);
        });
    }

    /** An ext4 filesystem volume, published: fio works on a file in the pod's target directory. */
    private static Target filesystemVolume(LocalCluster cluster, String name, long size, Map<String, String> parameters)
            throws Exception {
        // Room for the file of {@code size} bytes beside ext4's own metadata and reserved blocks.
        long capacity = size + size / 10 + 64 * MIB;
        Published volume = publish(cluster, "bench-" + name, capacity, LocalCluster.ext4(), parameters);
        return new Target(name, false, volume.target().resolve("bench.fio"), () -> release(cluster, volume));
    }

    /** A block volume, published: fio works on the device file kubelet would hand the pod. */
    private static Target blockVolume(LocalCluster cluster, String name, long size, Map<String, String> parameters)
            throws Exception {
        VolumeCapability block = VolumeCapability.newBuilder()
                .setBlock(VolumeCapability.BlockVolume.getDefaultInstance())
                .setAccessMode(VolumeCapability.AccessMode.newBuilder().setMode(VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER))
                .build();
        Published volume = publish(cluster, "bench-" + name, size, block, parameters);
        return new Target(name, true, volume.target(), () -> release(cluster, volume));
    }

    /** A volume the driver made and published. */
    record Published(String volumeId, Path staging, Path target) { }

    /** CreateVolume, ControllerPublishVolume, NodeStageVolume, NodePublishVolume, as the sidecars and kubelet call them. */
    private static Published publish(LocalCluster cluster, String name, long capacity, VolumeCapability capability,
            Map<String, String> parameters) throws Exception {
        var controller = cluster.controller();
        var node = cluster.node(NODE);
        String id = controller.createVolume(CreateVolumeRequest.newBuilder().setName(name)
                .setCapacityRange(CapacityRange.newBuilder().setRequiredBytes(capacity)).addVolumeCapabilities(capability)
                .putAllParameters(parameters)
                .setAccessibilityRequirements(TopologyRequirement.newBuilder().addPreferred(LocalCluster.on(NODE))
                        .addRequisite(LocalCluster.on(NODE)))
                .build()).getVolume().getVolumeId();
        var context = controller.controllerPublishVolume(ControllerPublishVolumeRequest.newBuilder()
                .setVolumeId(id).setNodeId(NODE).setVolumeCapability(capability).build()).getPublishContextMap();
        Path staging = Files.createDirectories(cluster.work.resolve("kubelet/plugins/" + name + "/globalmount"));
        Path pod = Files.createDirectories(cluster.work.resolve("kubelet/pods/uid-" + name + "/volumes"));
        Path target = pod.resolve(capability.hasBlock() ? name : "mount");
        node.nodeStageVolume(NodeStageVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(staging.toString())
                .setVolumeCapability(capability).putAllPublishContext(context).build());
        node.nodePublishVolume(NodePublishVolumeRequest.newBuilder().setVolumeId(id).setStagingTargetPath(staging.toString())
                .setTargetPath(target.toString()).setVolumeCapability(capability).putAllPublishContext(context).build());
        return new Published(id, staging, target);
    }

    /** Every phase undone, in kubelet's and the sidecars' order. */
    private static void release(LocalCluster cluster, Published volume) {
        var node = cluster.node(NODE);
        node.nodeUnpublishVolume(NodeUnpublishVolumeRequest.newBuilder().setVolumeId(volume.volumeId())
                .setTargetPath(volume.target().toString()).build());
        node.nodeUnstageVolume(NodeUnstageVolumeRequest.newBuilder().setVolumeId(volume.volumeId())
                .setStagingTargetPath(volume.staging().toString()).build());
        var controller = cluster.controller();
        controller.controllerUnpublishVolume(ControllerUnpublishVolumeRequest.newBuilder()
                .setVolumeId(volume.volumeId()).setNodeId(NODE).build());
        controller.deleteVolume(DeleteVolumeRequest.newBuilder().setVolumeId(volume.volumeId()).build());
    }

    /**
     * Block devices made by hand beside the driver's, each changed in one way from what the driver
     * makes: loop devices (an fallocated image, direct I/O, 512-byte sectors, the kernel's queue
     * settings) against the driver's block volume, thin volumes (the thin pool's chunk size and
     * zeroing) against its lvm-thin-block, so that the block table shows what that one change is worth.
     */
    static final class Experiments {

        static Target make(String name, Path pool, String xfsDevice, String volumeGroup, long size) throws Exception {
            if (name.startsWith("thin-")) {
                return thin(name, volumeGroup, size);
            }
            return switch (name) {
                case "loop-4k" -> loop(name, image(pool, name, size, false), "--sector-size", "4096");
                case "written" -> {
                    long start = System.nanoTime();
                    Path image = image(pool, name, size, true);
                    System.out.printf("experiment written: %d MiB of zeros written in %.1f s (fallocate: instant)%n",
                            size >> 20, (System.nanoTime() - start) / 1e9);
                    yield loop(name, image);
                }
                case "queue" -> {
                    Target target = loop(name, image(pool, name, size, false));
                    Path queue = Path.of("/sys/block", target.path().getFileName().toString(), "queue");
                    System.out.printf("experiment queue: the loop device's defaults: scheduler %s, nr_requests %s, max_sectors_kb %s,"
                            + " rotational %s, nomerges %s%n", read(queue.resolve("scheduler")), read(queue.resolve("nr_requests")),
                            read(queue.resolve("max_sectors_kb")), read(queue.resolve("rotational")), read(queue.resolve("nomerges")));
                    // No scheduler, merging off (each 4k request goes on alone), flagged not rotational.
                    Files.writeString(queue.resolve("scheduler"), "none");
                    Files.writeString(queue.resolve("nomerges"), "2");
                    Files.writeString(queue.resolve("rotational"), "0");
                    yield target;
                }
                case "xfs-pool" -> {
                    if (xfsDevice == null) {
                        throw new IllegalArgumentException("experiment xfs-pool needs xfs-device");
                    }
                    Path mount = Files.createTempDirectory("strata-datapath-xfs-");
                    Bench.run("mkfs.xfs", "-q", "-f", xfsDevice);
                    Bench.run("mount", xfsDevice, mount.toString());
                    Target target = loop(name, image(mount, name, size, false));
                    yield new Target(name, true, target.path(), () -> {
                        target.release().release();
                        Bench.run("umount", mount.toString());
                        Files.delete(mount);
                    });
                }
                default -> throw new IllegalArgumentException("no experiment " + name
                        + ": loop-4k, written, queue, xfs-pool, thin-<chunk size>[-nozero]");
            };
        }

        /**
         * A thin volume of {@code size} bytes in a thin pool of its own in the LVM pool's group,
         * made and activated by hand as the driver's lvm-thin-block is, one change away from it:
         * the thin pool's chunk size ({@code thin-1m}: 1 MiB chunks, where LVM's default is 64 KiB),
         * and with {@code -nozero} new chunks not zeroed (never for a driver's pool: a new volume
         * would read a deleted one's data; here it shows what zeroing costs on fresh blocks).
         */
        private static Target thin(String name, String volumeGroup, long size) throws Exception {
            if (volumeGroup == null) {
                throw new IllegalArgumentException("experiment " + name + " needs volume-group");
            }
            String chunk = name.substring("thin-".length()).replaceFirst("-nozero$", "");
            String zero = name.endsWith("-nozero") ? "n" : "y";
            String pool = "bench-" + name;
            String volume = pool + "-volume";
            lvm("lvcreate", "--type", "thin-pool", "--chunksize", chunk, "--zero", zero, "--size", ((size >> 20) + 64) + "m",
                    "--name", pool, volumeGroup);
            lvm("lvcreate", "--thin", "--virtualsize", (size >> 20) + "m", "--name", volume, volumeGroup + "/" + pool);
            Path device = Path.of(lvm("lvs", "--noheadings", "-o", "lv_dm_path", volumeGroup + "/" + volume).strip());
            System.out.printf("experiment %s: %s, %s%n", name, device,
                    lvm("lvs", "--noheadings", "-o", "chunk_size,zero", volumeGroup + "/" + pool).strip().replaceAll("\\s+", " "));
            return new Target(name, true, device, () -> lvm("lvremove", "--yes", volumeGroup + "/" + pool));
        }

        /** An lvm2 tool, as node-server runs them: without udev (the VM has none; LVM makes the /dev nodes). */
        private static String lvm(String tool, String... arguments) throws Exception {
            List<String> command = new ArrayList<>(List.of(tool, "--config",
                    "activation { udev_sync = 0 udev_rules = 0 verify_udev_operations = 0 monitoring = 0 }"));
            command.addAll(List.of(arguments));
            return Bench.run(command.toArray(String[]::new));
        }

        /** An image of {@code size} bytes in {@code dir}: fallocated (unwritten extents), as the driver makes them, or written. */
        private static Path image(Path dir, String name, long size, boolean written) throws Exception {
            Path image = dir.resolve("bench-" + name + ".img");
            if (written) {
                Bench.run("dd", "if=/dev/zero", "of=" + image, "bs=1M", "count=" + (size >> 20), "oflag=direct", "conv=fsync",
                        "status=none");
            } else {
                Bench.run("fallocate", "-l", Long.toString(size), image.toString());
            }
            return image;
        }

        /** A loop device with direct I/O over {@code image}, as losetup makes it with {@code options}. */
        private static Target loop(String name, Path image, String... options) throws Exception {
            List<String> command = new ArrayList<>(List.of("losetup", "--find", "--show", "--direct-io=on"));
            command.addAll(List.of(options));
            command.add(image.toString());
            Path device = Path.of(Bench.run(command.toArray(String[]::new)).strip());
            return new Target(name, true, device, () -> {
                Bench.run("losetup", "--detach", device.toString());
                Files.delete(image);
            });
        }

        private static String read(Path file) throws Exception {
            return Files.readString(file).strip();
        }
    }

    /**
     * Runs one fio job on {@code path} and returns the bytes per second it read and wrote together.
     * {@code runtime} 0: once over the whole size (the first write), else time-based.
     */
    private static double fio(Path path, long size, String name, List<String> options, int runtime) throws Exception {
        List<String> command = new ArrayList<>(List.of("fio", "--name=" + name, "--filename=" + path, "--size=" + size,
                "--ioengine=libaio", "--direct=1", "--numjobs=1", "--output-format=terse", "--terse-version=3"));
        if (runtime > 0) {
            command.addAll(List.of("--time_based", "--runtime=" + runtime));
        }
        command.addAll(options);
        String[] fields = Bench.run(command.toArray(String[]::new)).strip().lines().reduce((a, b) -> b).orElseThrow().split(";");
        // terse version 3: field 7 (index 6) is the read bandwidth and field 48 (index 47) the write bandwidth, in KiB/s.
        if (!fields[0].equals("3") || !fields[4].equals("0")) {
            throw new IllegalStateException("fio " + name + " on " + path + " failed: " + String.join(";", fields));
        }
        return (Double.parseDouble(fields[6]) + Double.parseDouble(fields[47])) * 1024;
    }

    /** The pool's own filesystem: ext4 on a device given, or on an image file attached with direct I/O. */
    private static final class PoolFilesystem {
        private final Path imageDir;
        private final String givenDevice;
        private final long imageBytes;
        private Path image;
        private String device;
        private Path mountPoint;

        PoolFilesystem(Path imageDir, String givenDevice, long imageBytes) {
            this.imageDir = imageDir;
            this.givenDevice = givenDevice;
            this.imageBytes = imageBytes;
        }

        void mount(String nodeId, Path pool) throws Exception {
            if (givenDevice != null) {
                device = givenDevice;
            } else {
                image = Files.createTempFile(imageDir, "strata-datapath-", ".img");
                // Allocated, not sparse, so that the pool's first writes do not allocate in the filesystem below.
                Bench.run("fallocate", "-l", Long.toString(imageBytes), image.toString());
                device = Bench.run("losetup", "--find", "--show", "--direct-io=on", image.toString()).strip();
            }
            Bench.run("mkfs.ext4", "-q", "-F", device);
            Bench.run("mount", device, pool.toString());
            mountPoint = pool;
        }

        String describe() {
            return givenDevice != null ? givenDevice : device + " (direct I/O) over the image " + image;
        }

        String underlying() throws Exception {
            if (givenDevice != null) {
                return "the device itself";
            }
            String source = Bench.run("df", "--output=source,fstype", imageDir.toString()).lines().skip(1).findFirst().orElse("?").strip();
            return "the host's " + source.replaceAll("\\s+", " (") + ")";
        }

        /** Unmounts the pool and frees its image; when something still holds it, says what to clean up by hand. */
        void unmount() throws Exception {
            try {
                if (mountPoint != null) {
                    Bench.run("umount", mountPoint.toString());
                }
                if (image != null && device != null) {
                    Bench.run("losetup", "--detach", device);
                }
            } catch (IllegalStateException e) {
                System.out.printf("the pool filesystem is still in use (%s): unmount what the driver left below %s, then run"
                        + " umount %s%s%n", e.getMessage().strip(), mountPoint, mountPoint,
                        image != null ? "; losetup --detach " + device + "; rm " + image : "");
                throw e;
            }
            if (image != null) {
                Files.delete(image);
            }
        }
    }

    private static List<String> list(String commaSeparated) {
        return java.util.Arrays.stream(commaSeparated.split(",")).map(String::strip).filter(item -> !item.isEmpty()).toList();
    }

    private static double median(List<Double> values) {
        List<Double> sorted = values.stream().sorted().toList();
        return sorted.get(sorted.size() / 2);
    }

    private static String memory() throws Exception {
        long kib = Files.readAllLines(Path.of("/proc/meminfo")).stream().filter(line -> line.startsWith("MemTotal:"))
                .mapToLong(line -> Long.parseLong(line.replaceAll("[^0-9]", ""))).findFirst().orElse(0);
        return Math.round(kib / 1048576.0) + " GiB";
    }

    private static String loadAverage() throws Exception {
        return Files.readString(Path.of("/proc/loadavg")).split(" ", 4)[0];
    }
}
