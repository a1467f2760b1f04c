package dev.strata.csi.backend.local;

import csi.v1.Csi;
import java.util.Optional;

/**
 * The topology segment of a local volume: the node that holds it. NodeGetInfo reports it (it
 * becomes a node label), CreateVolume reads it from accessibility requirements and returns it
 * (it becomes the PV's node affinity).
 */
public record LocalTopology(String key) {

    /** The segment key for a driver: {@code topology.<driver-name>/node}. */
    public static LocalTopology forDriver(String driverName) {
        return new LocalTopology("topology." + driverName + "/node");
    }

    public Csi.Topology of(String nodeId) {
        return Csi.Topology.newBuilder().putSegments(key, nodeId).build();
    }

    /** The node a segment names, if it names one for this driver. */
    public Optional<String> nodeOf(Csi.Topology topology) {
        return Optional.ofNullable(topology.getSegmentsMap().get(key));
    }
}
