package dev.strata.csi.node.local.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.backend.local.records.ImageRecord;
import dev.strata.csi.log.Log;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The image records on disk across releases: a record exactly as the driver wrote it before the change (the
 * message then sat in agent.proto and had no version) is read with every field; what is written
 * now carries version 1; a record of a newer release is left alone, not misread.
 */
class RecordStoreTest {

    /** Byte for byte what RecordStore wrote at 5ee9c66 for an attached, formatted, published volume. */
    private static final String RELEASE_0_1_0 = """
            name: "pvc-old"
            capacity_bytes: 67108864
            allocation: FULL
            state: READY
            attached: true
            published_node_ids: "node-a"
            filesystem: "xfs"
            """;

    @TempDir
    Path pool;

    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    private final Log log = new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0);

    @Test
    void aRecordOfRelease010IsReadWithEveryField() throws Exception {
        Files.writeString(pool.resolve("pvc-old.record"), RELEASE_0_1_0);
        Files.writeString(pool.resolve("pvc-block.record"), "name: \"pvc-block\"\ncapacity_bytes: 1048576\n"
                + "allocation: SPARSE\nstate: DELETING\nused_as_block: true\n");

        ImageRecord old = new RecordStore(pool, log).read("pvc-old").orElseThrow();
        assertEquals(ImageRecord.newBuilder().setName("pvc-old").setCapacityBytes(64L << 20)
                .setAllocation(ImageRecord.Allocation.FULL).setState(ImageRecord.State.READY).setAttached(true)
                .addPublishedNodeIds("node-a").setFilesystem("xfs").build(), old);
        assertEquals(0, old.getVersion());

        List<ImageRecord> all = new RecordStore(pool, log).all();
        assertEquals(2, all.size());
        ImageRecord block = all.stream().filter(r -> r.getName().equals("pvc-block")).findFirst().orElseThrow();
        assertEquals(ImageRecord.State.DELETING, block.getState());
        assertTrue(block.getUsedAsBlock());
    }

    @Test
    void aRecordWrittenNowCarriesVersionOneAndKeepsTheOldFields() throws Exception {
        Files.writeString(pool.resolve("pvc-old.record"), RELEASE_0_1_0);
        RecordStore store = new RecordStore(pool, log);
        store.write(store.read("pvc-old").orElseThrow().toBuilder().setUsedAsBlock(false).build());

        String text = Files.readString(pool.resolve("pvc-old.record"));
        assertTrue(text.startsWith(RELEASE_0_1_0), text); // the old fields, unchanged, then the version
        assertTrue(text.endsWith("version: 1\n"), text);
        assertEquals(1, new RecordStore(pool, log).read("pvc-old").orElseThrow().getVersion());
    }

    @Test
    void aRecordOfANewerReleaseIsLeftAloneAndLogged() throws Exception {
        Files.writeString(pool.resolve("pvc-new.record"), RELEASE_0_1_0.replace("pvc-old", "pvc-new") + "version: 2\n");
        Files.writeString(pool.resolve("pvc-old.record"), RELEASE_0_1_0);

        List<ImageRecord> all = new RecordStore(pool, log).all();

        assertEquals(List.of("pvc-old"), all.stream().map(ImageRecord::getName).toList());
        assertTrue(logged.toString(StandardCharsets.UTF_8).contains("format version 2 by a newer release"), logged.toString());
        assertTrue(Files.exists(pool.resolve("pvc-new.record")));
    }
}
