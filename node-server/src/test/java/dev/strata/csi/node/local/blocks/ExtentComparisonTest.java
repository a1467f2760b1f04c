package dev.strata.csi.node.local.blocks;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.strata.csi.linux.Kernel.Extent;
import dev.strata.csi.node.local.blocks.ExtentComparison.Piece;
import dev.strata.csi.node.local.blocks.ExtentComparison.Verdict;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What two extent maps say of two files, and {@link RangeWriter}'s joining and cutting. */
class ExtentComparisonTest {

    private static final long K = 4096;

    private static Extent at(long logical, long physical, long length) {
        return new Extent(logical, physical, length, 0);
    }

    private static List<String> verdicts(List<Piece> pieces) {
        return pieces.stream().map(p -> p.start() / K + "-" + p.end() / K + ":" + p.verdict()).toList();
    }

    @Test
    void sharedExtentsAreTheSameAndAWriteSinceIsDifferentWithoutReading() {
        // A reflink of a 16-block file, then blocks 4-5 rewritten (copied on write elsewhere) and block 12 written into a hole.
        List<Extent> base = List.of(at(0, 100 * K, 8 * K));
        List<Extent> target = List.of(at(0, 100 * K, 4 * K), at(4 * K, 500 * K, 2 * K), at(6 * K, 106 * K, 2 * K), at(12 * K, 600 * K, K));
        assertEquals(List.of("0-4:SAME", "4-6:DIFFERENT", "6-8:SAME", "8-12:SAME", "12-13:DIFFERENT", "13-16:SAME"),
                verdicts(ExtentComparison.compare(base, target, 0, 16 * K)));
    }

    @Test
    void filesSharingNothingMustBeReadWhereEitherHasData() {
        // ext4: a sparse copy, each file's data at its own place.
        List<Extent> base = List.of(at(0, 100 * K, 2 * K));
        List<Extent> target = List.of(at(0, 300 * K, 2 * K), at(10 * K, 310 * K, K));
        List<Piece> pieces = ExtentComparison.compare(base, target, 0, 16 * K);
        assertEquals(List.of("0-2:READ", "2-10:SAME", "10-11:READ", "11-16:SAME"), verdicts(pieces));
        assertEquals(false, pieces.get(2).baseData(), "a hole in the base reads without the disk");
        assertEquals(true, pieces.get(2).targetData());
    }

    @Test
    void unwrittenExtentsReadAsZerosAndPlacesNotKnownAreRead() {
        List<Extent> base = List.of(at(0, 100 * K, 4 * K), new Extent(4 * K, 200 * K, 2 * K, Extent.UNWRITTEN));
        List<Extent> target = List.of(at(0, 100 * K, 2 * K), new Extent(2 * K, 0, 2 * K, Extent.ENCODED | Extent.UNKNOWN));
        assertEquals(List.of("0-2:SAME", "2-4:READ", "4-6:SAME", "6-8:SAME"), verdicts(ExtentComparison.compare(base, target, 0, 8 * K)));
    }

    @Test
    void startsAtTheOffsetAndStopsAtTheTargetsSize() {
        List<Extent> base = List.of(at(0, 100 * K, 4 * K));
        List<Extent> target = List.of(at(0, 100 * K, 2 * K), at(2 * K, 50 * K, 10 * K));
        // The base is smaller (expanded since): past its end it is a hole.
        assertEquals(List.of("3-4:DIFFERENT", "4-6:DIFFERENT"), verdicts(ExtentComparison.compare(base, target, 3 * K, 6 * K)));
    }

    @Test
    void theWriterJoinsAdjacentRangesAndCutsThemToItsBounds() throws Exception {
        List<BlockRange> sent = new ArrayList<>();
        RangeWriter out = new RangeWriter(sent::add, 10, 100);
        out.add(0, 12);
        out.add(12, 20);
        out.add(30, 40);
        out.add(35, 50);
        out.add(90, 120);
        out.add(130, 140);
        out.finish();
        assertEquals(List.of(new BlockRange(10, 10), new BlockRange(30, 20), new BlockRange(90, 10)), sent);
    }
}
