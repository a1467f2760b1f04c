package dev.strata.csi.node.local.lvm;

import dev.strata.csi.log.Log;
import dev.strata.csi.mount.DeviceNumber;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.DeviceHolders;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.CommandResult;
import dev.strata.csi.system.Commands;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The real {@link LogicalVolumes}: the lvm2 tools, run as child processes. Every command carries
 * {@code --config} that turns udev synchronisation off and has LVM make the /dev nodes itself: a
 * node-server container has no udev (nor has the test VM), and with synchronisation on, lvchange
 * would wait for udev events that never come. Nor does it reach the host's dmeventd: monitoring
 * (the thin pool's autoextension) is left to the host's own activation of the pool. Nor does it ask
 * udev's database which devices there are, which a container does not have: lvm2 lists them from
 * sysfs. The driver's volumes carry the tag {@value #TAG}; others in the group are the admin's and
 * are never listed or touched. Each command's duration is logged at debug level: under emulation,
 * or on a busy node, lvm2's commands take seconds, and a slow call shows which.
 */
public final class SystemLogicalVolumes implements LogicalVolumes {

    static final String TAG = "strata.csi.dev";
    static final String CONFIG = "activation { udev_sync = 0 udev_rules = 0 verify_udev_operations = 0"
            + " monitoring = 0 } devices { obtain_device_list_from_udev = 0 external_device_info_source = \"none\" }";
    /** lvcreate zeroes a thin volume's first blocks and may wait on the pool's metadata; generous, never endless. */
    private static final Duration TIMEOUT = Duration.ofMinutes(2);
    /** Zeroing writes a linear volume's every byte where the disk has no write-zeroes command: a terabyte at 200 MB/s takes 90 minutes. */
    private static final Duration ZERO_TIMEOUT = Duration.ofHours(6);
    private static final String FIELDS = "lv_name,lv_size,lv_attr,lv_dm_path,lv_kernel_major,lv_kernel_minor,lv_tags";

    private final Commands commands;
    private final String group;
    private final String thinPool;
    private final Log log;

    public SystemLogicalVolumes(Commands commands, String group, String thinPool, Log log) {
        this.commands = commands;
        this.group = group;
        this.thinPool = thinPool;
        this.log = log;
    }

    @Override
    public String volumeGroup() {
        return group;
    }

    @Override
    public GroupSpace groupSpace() throws DeviceException {
        String[] fields = report("vgs", "vg_size,vg_free", group).getFirst();
        return new GroupSpace(Long.parseLong(fields[0]), Long.parseLong(fields[1]));
    }

    @Override
    public Optional<ThinPoolSpace> thinPoolSpace() throws DeviceException {
        return space().thinPool();
    }

    /** One lvs: each row of it carries its group's size and free space too. */
    @Override
    public Space space() throws DeviceException {
        List<String[]> rows = report("lvs", "vg_size,vg_free,lv_name,lv_size,data_percent,lv_metadata_size,metadata_percent,zero", group);
        if (rows.isEmpty()) { // a group without logical volumes: lvs has no row to carry the group's figures
            return new Space(groupSpace(), Optional.empty());
        }
        String[] first = rows.getFirst();
        GroupSpace groupSpace = new GroupSpace(Long.parseLong(first[0]), Long.parseLong(first[1]));
        Optional<ThinPoolSpace> thin = rows.stream().filter(fields -> fields[2].equals(thinPool)).findFirst().map(fields ->
                new ThinPoolSpace(Long.parseLong(fields[3]), percent(fields[4]), size(fields[5]), percent(fields[6]), fields[7].equals("1")));
        return new Space(groupSpace, thin);
    }

    @Override
    public List<LogicalVolume> list() throws DeviceException {
        List<LogicalVolume> volumes = new ArrayList<>();
        for (String[] fields : report("lvs", FIELDS, group)) {
            if (List.of(fields[6].split(",")).contains(TAG)) {
                volumes.add(volume(fields));
            }
        }
        return volumes;
    }

    @Override
    public Optional<LogicalVolume> find(String name) throws DeviceException {
        return list().stream().filter(volume -> volume.name().equals(name)).findFirst();
    }

    @Override
    public void createThin(String name, long sizeBytes) throws DeviceException {
        lvm("lvcreate", "--thin", "--virtualsize", sizeBytes + "b", "--name", name, "--addtag", TAG,
                "--setactivationskip", "n", "--activate", "n", group + "/" + thinPool);
    }

    @Override
    public void createLinear(String name, long sizeBytes, boolean zeroed) throws DeviceException {
        // Made active, as lvcreate must to wipe the start of a linear volume, then deactivated: attach activates.
        lvm("lvcreate", "--size", sizeBytes + "b", "--name", name, "--addtag", TAG, "--wipesignatures", "y", "--zero", "y",
                "--yes", group);
        if (zeroed) {
            zeroDevice(find(name).orElseThrow(() -> new DeviceException("lvcreate made no logical volume " + name)), 0);
        }
        deactivate(name);
    }

    @Override
    public void zero(String name, long fromBytes) throws DeviceException {
        LogicalVolume volume = find(name).orElseThrow(() -> new DeviceException("no logical volume " + group + "/" + name));
        if (volume.active()) {
            zeroDevice(volume, fromBytes);
            return;
        }
        LogicalVolume active = activate(name);
        try {
            zeroDevice(active, fromBytes);
        } finally {
            deactivate(name);
        }
    }

    private void zeroDevice(LogicalVolume volume, long fromBytes) throws DeviceException {
        if (fromBytes >= volume.sizeBytes()) {
            return;
        }
        zeroDevice(volume, fromBytes, volume.sizeBytes() - fromBytes);
    }

    private void zeroDevice(LogicalVolume volume, long offset, long length) throws DeviceException {
        String[] argv = {"blkdiscard", "--zeroout", "--force", "--offset", Long.toString(offset),
                "--length", Long.toString(length), volume.device().toString()};
        run(ZERO_TIMEOUT, String.join(" ", argv), argv);
    }

    @Override
    public void discard(String name, long offset, long length) throws DeviceException {
        LogicalVolume volume = find(name).filter(LogicalVolume::active)
                .orElseThrow(() -> new DeviceException("no active logical volume " + group + "/" + name));
        String[] argv = {"blkdiscard", "--force", "--offset", Long.toString(offset), "--length", Long.toString(length),
                volume.device().toString()};
        run(ZERO_TIMEOUT, String.join(" ", argv), argv);
    }

    @Override
    public void snapshot(String origin, String name) throws DeviceException {
        // Without a size: a thin snapshot. LVM gives one the activation-skip flag; cleared, so that attach can activate it.
        lvm("lvcreate", "--snapshot", "--name", name, "--addtag", TAG, "--setactivationskip", "n", "--activate", "n",
                group + "/" + origin);
    }

    @Override
    public long thinId(String name) throws DeviceException {
        String id = lvm("lvs", "--noheadings", "--options", "thin_id", group + "/" + name).stdout().strip();
        if (!id.matches("[0-9]+")) {
            throw new DeviceException("logical volume " + group + "/" + name + " has no thin device id (lvs says \"" + id + "\")");
        }
        return Long.parseLong(id);
    }

    @Override
    public void extend(String name, long sizeBytes) throws DeviceException {
        // The filesystem is the node's to grow (NodeExpandVolume), as for an image: no --resizefs.
        lvm("lvextend", "--size", sizeBytes + "b", group + "/" + name);
    }

    @Override
    public List<DeviceNumber> holders(LogicalVolume volume) throws DeviceException {
        return DeviceHolders.of(volume.deviceNumber());
    }

    @Override
    public LogicalVolume activate(String name) throws DeviceException {
        lvm("lvchange", "--activate", "y", group + "/" + name);
        return find(name).filter(LogicalVolume::active).orElseThrow(() ->
                new DeviceException("lvchange --activate y " + group + "/" + name + " succeeded but the volume is not active"));
    }

    @Override
    public void deactivate(String name) throws DeviceException {
        lvm("lvchange", "--activate", "n", group + "/" + name);
    }

    @Override
    public void remove(String name) throws DeviceException {
        lvm("lvremove", "--yes", group + "/" + name);
    }

    private static LogicalVolume volume(String[] fields) {
        String attributes = fields[2];
        boolean active = attributes.length() > 4 && attributes.charAt(4) == 'a';
        int major = Integer.parseInt(fields[4]);
        int minor = Integer.parseInt(fields[5]);
        Optional<DeviceNumber> number = active && major >= 0 && minor >= 0 ? Optional.of(new DeviceNumber(major, minor)) : Optional.empty();
        return new LogicalVolume(fields[0], Long.parseLong(fields[1]), attributes.charAt(0) == 'V', active, Path.of(fields[3]), number);
    }

    private static long size(String field) {
        return field.isEmpty() ? 0 : Long.parseLong(field);
    }

    private static double percent(String field) {
        return field.isEmpty() ? 0 : Double.parseDouble(field);
    }

    /** The report's rows, each split into its fields, sizes in bytes, yes-or-no fields (zero) 1 or 0. */
    private List<String[]> report(String tool, String fields, String target) throws DeviceException {
        String out = lvm(tool, "--noheadings", "--nosuffix", "--units", "b", "--binary", "--separator", "|", "--options", fields, target)
                .stdout();
        return out.lines().map(String::strip).filter(line -> !line.isEmpty()).map(line -> line.split("\\|", -1)).toList();
    }

    private CommandResult lvm(String tool, String... arguments) throws DeviceException {
        List<String> argv = new ArrayList<>(List.of(tool, "--config", CONFIG));
        argv.addAll(List.of(arguments));
        return run(TIMEOUT, tool + " " + String.join(" ", arguments), argv.toArray(String[]::new));
    }

    /** Runs the command, logging its duration as {@code what} (without lvm2's long --config). */
    private CommandResult run(Duration timeout, String what, String... argv) throws DeviceException {
        long start = System.nanoTime();
        boolean ok = false;
        try {
            CommandResult result = commands.run(timeout, argv).check(what);
            ok = true;
            return result;
        } catch (CommandException e) {
            throw new DeviceException(e.getMessage(), e);
        } finally {
            log.debug("lvm command", "command", what, "ok", ok, "millis", (System.nanoTime() - start) / 1_000_000);
        }
    }
}
