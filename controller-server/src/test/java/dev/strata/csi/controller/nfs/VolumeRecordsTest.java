package dev.strata.csi.controller.nfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.strata.csi.backend.nfs.records.NfsVolumeRecord;
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
 * An export's volume records across releases: a record exactly as the driver wrote it before the change (no
 * version field) is read with every field; what is written now carries version 1; a record of a
 * newer release is left alone, not misread.
 */
class VolumeRecordsTest {

    /** Byte for byte what VolumeRecords wrote at 5ee9c66 for a published volume with a project quota. */
    private static final String RELEASE_0_1_0 = """
            volume_id: "nfs/nfs.example.com/%2Fsrv%2Fexport/pvc-1/delete"
            name: "pvc-1"
            capacity_bytes: 1073741824
            project_id: 1048576
            published_node_ids: "node-a"
            published_node_ids: "node-b"
            sub_dir: "pvc-1"
            """;

    @TempDir
    Path dir;

    private final ByteArrayOutputStream logged = new ByteArrayOutputStream();
    private final Log log = new Log(new PrintStream(logged, true, StandardCharsets.UTF_8), 0);

    @Test
    void aRecordOfRelease010IsReadWithEveryField() throws Exception {
        Files.writeString(dir.resolve(VolumeRecords.key("pvc-1") + ".record"), RELEASE_0_1_0);

        NfsVolumeRecord record = new VolumeRecords(dir).read("pvc-1").orElseThrow();

        assertEquals(NfsVolumeRecord.newBuilder().setVolumeId("nfs/nfs.example.com/%2Fsrv%2Fexport/pvc-1/delete")
                .setName("pvc-1").setCapacityBytes(1L << 30).setProjectId(1048576)
                .addPublishedNodeIds("node-a").addPublishedNodeIds("node-b").setSubDir("pvc-1").build(), record);
        assertEquals(List.of(record), new VolumeRecords(dir).all(log));
    }

    @Test
    void aRecordWrittenNowCarriesVersionOneAndKeepsTheOldFields() throws Exception {
        Path file = dir.resolve(VolumeRecords.key("pvc-1") + ".record");
        Files.writeString(file, RELEASE_0_1_0);
        VolumeRecords records = new VolumeRecords(dir);
        records.write("pvc-1", records.read("pvc-1").orElseThrow());

        String text = Files.readString(file);
        assertEquals(RELEASE_0_1_0 + "version: 1\n", text);
        assertEquals(1, records.read("pvc-1").orElseThrow().getVersion());
    }

    @Test
    void aRecordOfANewerReleaseIsLeftAloneAndLogged() throws Exception {
        Path file = dir.resolve(VolumeRecords.key("pvc-2") + ".record");
        Files.writeString(file, RELEASE_0_1_0.replace("pvc-1", "pvc-2") + "version: 7\n");
        Files.writeString(dir.resolve(VolumeRecords.key("pvc-1") + ".record"), RELEASE_0_1_0);

        List<NfsVolumeRecord> all = new VolumeRecords(dir).all(log);

        assertEquals(List.of("pvc-1"), all.stream().map(NfsVolumeRecord::getName).toList());
        assertTrue(logged.toString(StandardCharsets.UTF_8).contains("format version 7 by a newer release"), logged.toString());
        assertTrue(Files.exists(file));
    }
}
