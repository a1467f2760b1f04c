package dev.strata.csi.node.local.blocks;

import dev.strata.csi.linux.Kernel.Extent;
import java.util.ArrayList;
import java.util.List;

/**
 * Compares two files' extent maps (FIEMAP) without reading them: cuts {@code [0, size)} where
 * either map starts or ends an extent, and says of each piece whether the two files hold the same
 * bytes there, different bytes, or whether only their data can tell.
 *
 * <p>The same: both holes, both unwritten (both read as zeros), or both at the same place on the
 * device (a reflink's shared extent, never written since). When the two files share at least one
 * extent, one was made from the other by a reflink on a filesystem that copies on write, and an
 * extent at another place means a write since: different, without reading. When they share none
 * (ext4, or a sparse copy), their places say nothing: only reading both tells. An extent whose
 * place is not a plain address (compressed, inline, not yet allocated) never counts as shared.
 */
public final class ExtentComparison {

    public enum Verdict { SAME, DIFFERENT, READ }

    /**
     * A piece of the files and what the maps say of it; {@code baseData} and {@code targetData}:
     * whether each file has an extent there (a read of a hole touches no disk).
     */
    public record Piece(long start, long end, Verdict verdict, boolean baseData, boolean targetData) {}

    private ExtentComparison() {}

    /** The pieces of {@code [from, size)}, in order; both lists of extents in order of offset. */
    public static List<Piece> compare(List<Extent> base, List<Extent> target, long from, long size) {
        List<long[]> cuts = new ArrayList<>(); // [start, end, baseIndex, targetIndex] with -1 for a hole
        int b = 0;
        int t = 0;
        long at = from;
        while (at < size) {
            while (b < base.size() && base.get(b).end() <= at) {
                b++;
            }
            while (t < target.size() && target.get(t).end() <= at) {
                t++;
            }
            long end = size;
            int inBase = -1;
            int inTarget = -1;
            if (b < base.size()) {
                Extent e = base.get(b);
                if (e.logical() <= at) {
                    inBase = b;
                    end = Math.min(end, e.end());
                } else {
                    end = Math.min(end, e.logical());
                }
            }
            if (t < target.size()) {
                Extent e = target.get(t);
                if (e.logical() <= at) {
                    inTarget = t;
                    end = Math.min(end, e.end());
                } else {
                    end = Math.min(end, e.logical());
                }
            }
            cuts.add(new long[] {at, end, inBase, inTarget});
            at = end;
        }
        boolean shared = sharesAny(base, target); // over the whole files: the compared range may all be written since
        List<Piece> pieces = new ArrayList<>(cuts.size());
        for (long[] cut : cuts) {
            Extent inBase = cut[2] < 0 ? null : base.get((int) cut[2]);
            Extent inTarget = cut[3] < 0 ? null : target.get((int) cut[3]);
            pieces.add(new Piece(cut[0], cut[1], verdict(inBase, inTarget, cut[0], shared), inBase != null, inTarget != null));
        }
        return pieces;
    }

    private static Verdict verdict(Extent base, Extent target, long at, boolean shared) {
        boolean baseZeros = base == null || base.unwritten();
        boolean targetZeros = target == null || target.unwritten();
        if (baseZeros && targetZeros) {
            return Verdict.SAME;
        }
        if (base != null && target != null && samePlace(base, target, at)) {
            return Verdict.SAME;
        }
        boolean baseKnown = base == null || base.located();
        boolean targetKnown = target == null || target.located();
        return shared && baseKnown && targetKnown ? Verdict.DIFFERENT : Verdict.READ;
    }

    /** Whether both extents put the byte at {@code at} at one place on the device. */
    private static boolean samePlace(Extent base, Extent target, long at) {
        return base.located() && target.located()
                && base.physical() + (at - base.logical()) == target.physical() + (at - target.logical());
    }

    /** Whether any byte lies at the same place in both files. */
    private static boolean sharesAny(List<Extent> base, List<Extent> target) {
        int b = 0;
        int t = 0;
        while (b < base.size() && t < target.size()) {
            Extent x = base.get(b);
            Extent y = target.get(t);
            long start = Math.max(x.logical(), y.logical());
            if (start < Math.min(x.end(), y.end()) && samePlace(x, y, start)) {
                return true;
            }
            if (x.end() <= y.end()) {
                b++;
            } else {
                t++;
            }
        }
        return false;
    }
}
