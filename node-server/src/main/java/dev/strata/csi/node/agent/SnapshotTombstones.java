package dev.strata.csi.node.agent;

import com.google.protobuf.InvalidProtocolBufferException;
import dev.strata.csi.agent.api.SnapshotTombstone;
import dev.strata.csi.system.DurableFiles;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * The tombstones of snapshots deleted while nodes that held them (or copies of them) were down
 * (DeleteSnapshotRequest.tombstone_nodes, docs/snapshot-copies.md): one small file each in
 * {@code <pool-dir>/tombstones}, written durably, so that they outlive this agent and any
 * controller restart. The inventory reports them; controller-server deletes the copies on those
 * nodes when they come back and then removes the tombstone. Callers hold the snapshot name's lock.
 */
public final class SnapshotTombstones {

    private static final String SUFFIX = ".tombstone";

    private final Path dir;

    public SnapshotTombstones(Path dir) {
        this.dir = dir;
    }

    /** Keeps the tombstone, replacing one of the same name; none with no nodes. */
    void put(SnapshotTombstone tombstone) throws IOException {
        if (tombstone.getNodesCount() == 0) {
            remove(tombstone.getName());
            return;
        }
        DurableFiles.createDirectories(dir);
        DurableFiles.write(file(tombstone.getName()), tombstone.toByteArray());
    }

    void remove(String name) throws IOException {
        if (Files.isDirectory(dir)) {
            DurableFiles.delete(file(name));
        }
    }

    Optional<SnapshotTombstone> get(String name) throws IOException {
        try {
            return Optional.of(SnapshotTombstone.parseFrom(Files.readAllBytes(file(name))));
        } catch (NoSuchFileException e) {
            return Optional.empty();
        }
    }

    List<SnapshotTombstone> all() throws IOException {
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        List<SnapshotTombstone> all = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path file : files.filter(path -> path.getFileName().toString().endsWith(SUFFIX)).sorted().toList()) {
                try {
                    all.add(SnapshotTombstone.parseFrom(Files.readAllBytes(file)));
                } catch (InvalidProtocolBufferException | NoSuchFileException e) {
                    // removed meanwhile, or no tombstone of ours
                }
            }
        }
        return all;
    }

    private Path file(String name) {
        return dir.resolve(name + SUFFIX); // names are checked by the agent's calls: no '/' in them
    }
}
