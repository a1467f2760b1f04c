package dev.strata.csi.metrics;

/** Histogram bucket bounds, in seconds. */
public final class Buckets {

    private Buckets() {}

    /**
     * From a millisecond (Probe, a bind mount, a call answered from a record) to ten minutes (a
     * fully allocated image, a slow NFS server): the sidecars' csi_plugin_operations_seconds
     * starts at 100 ms, too coarse for most of this driver's calls.
     */
    public static final double[] OPERATIONS = {
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600
    };
}
