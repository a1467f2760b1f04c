package dev.strata.csi.node.local.lvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.strata.csi.node.local.DeviceException;
import dev.strata.csi.node.local.blocks.BlockRange;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * SystemThinMappings reads thin_dump's and thin_delta's XML (as thin-provisioning-tools 0.9 print
 * it: thin_delta lists the same ranges too) into byte ranges; the in-memory stand-in answers alike.
 */
class ThinMappingsTest {

    private static final long CHUNK = 128 * 512;

    private static final String DELTA = """
            <superblock uuid="" time="1" transaction="2" data_block_size="128" nr_data_blocks="1000">
              <diff left="1" right="2">
                <same begin="0" length="2"/>
                <different begin="2" length="1"/>
                <same begin="10" length="1"/>
                <left_only begin="20" length="2"/>
                <right_only begin="30" length="1"/>
              </diff>
            </superblock>
            """;

    private static final String DUMP = """
            <superblock uuid="" time="1" transaction="2" flags="0" version="2" data_block_size="128" nr_data_blocks="1000">
              <device dev_id="2" mapped_blocks="5" transaction="0" creation_time="1" snap_time="1">
                <range_mapping origin_begin="0" data_begin="0" length="2" time="0"/>
                <single_mapping origin_block="2" data_block="7" time="1"/>
                <single_mapping origin_block="10" data_block="3" time="0"/>
              </device>
            </superblock>
            """;

    @Test
    void deltaIsWhatDiffersLeftOrRightNotWhatIsTheSame() throws Exception {
        assertEquals(List.of(new BlockRange(2 * CHUNK, CHUNK), new BlockRange(20 * CHUNK, 2 * CHUNK), new BlockRange(30 * CHUNK, CHUNK)),
                SystemThinMappings.delta(DELTA));
    }

    @Test
    void dumpGivesEveryMappedChunk() throws Exception {
        assertEquals(List.of(new BlockRange(0, 2 * CHUNK), new BlockRange(2 * CHUNK, CHUNK), new BlockRange(10 * CHUNK, CHUNK)),
                SystemThinMappings.mappings(DUMP));
    }

    @Test
    void outputWithoutABlockSizeIsRefused() {
        assertThrows(DeviceException.class, () -> SystemThinMappings.delta("<diff left=\"1\" right=\"2\"></diff>"));
    }

    @Test
    void theStandInSharesAnOriginsMapWithItsSnapshotUntilWritten() throws Exception {
        InMemoryThinMappings thin = new InMemoryThinMappings();
        long chunk = InMemoryThinMappings.CHUNK;
        thin.write(1, 0, 3 * chunk);
        thin.snapshot(1, 2);
        thin.write(1, chunk + 10, 1); // one byte: its whole chunk
        thin.write(1, 10 * chunk, chunk);
        thin.snapshot(1, 3);
        assertEquals(List.of(new BlockRange(chunk, chunk), new BlockRange(10 * chunk, chunk)), thin.differing(2, 3));
        assertEquals(List.of(new BlockRange(0, 3 * chunk), new BlockRange(10 * chunk, chunk)), thin.mapped(3));
        assertEquals(List.of(), thin.differing(3, 3));
    }
}
