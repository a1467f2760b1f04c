package dev.strata.csi.node.local.lvm;

import dev.strata.csi.log.Log;
import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.BlockRange;
import dev.strata.csi.system.CommandException;
import dev.strata.csi.system.Commands;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The real {@link ThinMappings}: thin_dump and thin_delta (thin-provisioning-tools) on a metadata
 * snapshot of the running thin pool, which dmsetup reserves for the read and releases after it
 * (the kernel keeps one at a time: the reads here take turns, and one a crash left reserved is
 * released first). The pool is activated when it is not (none of its thin volumes active), and
 * left active.
 */
public final class SystemThinMappings implements ThinMappings {

    private static final Duration TIMEOUT = Duration.ofMinutes(2);
    private static final Pattern BLOCK_SIZE = Pattern.compile("data_block_size=\"(\\d+)\"");
    private static final Pattern DELTA = Pattern.compile("<(different|left_only|right_only) begin=\"(\\d+)\" length=\"(\\d+)\"");
    private static final Pattern RANGE = Pattern.compile("<range_mapping origin_begin=\"(\\d+)\" data_begin=\"\\d+\" length=\"(\\d+)\"");
    private static final Pattern SINGLE = Pattern.compile("<single_mapping origin_block=\"(\\d+)\"");

    private final Commands commands;
    private final String group;
    private final String thinPool;
    private final Log log;

    public SystemThinMappings(Commands commands, String group, String thinPool, Log log) {
        this.commands = commands;
        this.group = group;
        this.thinPool = thinPool;
        this.log = log;
    }

    @Override
    public List<BlockRange> mapped(long id) throws DeviceException {
        return mappings(withMetadataSnapshot("thin_dump", "--metadata-snap", "--dev-id", Long.toString(id)));
    }

    @Override
    public List<BlockRange> differing(long base, long target) throws DeviceException {
        return delta(withMetadataSnapshot("thin_delta", "--metadata-snap", "--snap1", Long.toString(base), "--snap2", Long.toString(target)));
    }

    /** thin_dump's mappings of one device, as byte ranges. */
    static List<BlockRange> mappings(String xml) throws DeviceException {
        long chunk = chunkBytes(xml);
        List<BlockRange> ranges = new ArrayList<>();
        for (String line : xml.split("\n")) {
            Matcher range = RANGE.matcher(line);
            Matcher single = SINGLE.matcher(line);
            if (range.find()) {
                ranges.add(new BlockRange(Long.parseLong(range.group(1)) * chunk, Long.parseLong(range.group(2)) * chunk));
            } else if (single.find()) {
                ranges.add(new BlockRange(Long.parseLong(single.group(1)) * chunk, chunk));
            }
        }
        return ranges;
    }

    /** thin_delta's differences, as byte ranges (its same ranges left out). */
    static List<BlockRange> delta(String xml) throws DeviceException {
        long chunk = chunkBytes(xml);
        List<BlockRange> ranges = new ArrayList<>();
        Matcher found = DELTA.matcher(xml);
        while (found.find()) {
            ranges.add(new BlockRange(Long.parseLong(found.group(2)) * chunk, Long.parseLong(found.group(3)) * chunk));
        }
        return ranges;
    }

    private static long chunkBytes(String xml) throws DeviceException {
        Matcher size = BLOCK_SIZE.matcher(xml);
        if (!size.find()) {
            throw new DeviceException("no data_block_size in the thin pool's metadata dump");
        }
        return Long.parseLong(size.group(1)) * 512; // in sectors
    }

    /** Runs the tool on the pool's metadata device with a metadata snapshot reserved; its output. */
    private synchronized String withMetadataSnapshot(String... tool) throws DeviceException {
        String pool = dmName(thinPool) + "-tpool";
        if (!Files.exists(Path.of("/dev/mapper", pool))) {
            run("lvchange", "--config", SystemLogicalVolumes.CONFIG, "--activate", "y", group + "/" + thinPool);
        }
        try {
            run("dmsetup", "message", pool, "0", "reserve_metadata_snap");
        } catch (DeviceException e) { // one left reserved by a process that died: released, then ours
            log.warn("releasing a thin pool metadata snapshot left reserved", "pool", pool, "error", e.getMessage());
            run("dmsetup", "message", pool, "0", "release_metadata_snap");
            run("dmsetup", "message", pool, "0", "reserve_metadata_snap");
        }
        try {
            List<String> argv = new ArrayList<>(List.of(tool));
            argv.add("/dev/mapper/" + dmName(thinPool + "_tmeta"));
            return run(argv.toArray(String[]::new));
        } finally {
            run("dmsetup", "message", pool, "0", "release_metadata_snap");
        }
    }

    /** The device-mapper name of a logical volume of the group: dashes doubled, joined by one. */
    private String dmName(String volume) {
        return group.replace("-", "--") + "-" + volume.replace("-", "--");
    }

    private String run(String... argv) throws DeviceException {
        String what = String.join(" ", argv);
        long start = System.nanoTime();
        try {
            return commands.run(TIMEOUT, argv).check(what).stdout();
        } catch (CommandException e) {
            throw new DeviceException(e.getMessage(), e);
        } finally {
            log.debug("thin metadata command", "command", what, "millis", (System.nanoTime() - start) / 1_000_000);
        }
    }
}
