package dev.strata.csi.controller;

import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Volume;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.agent.api.ListImagesRequest;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.rpc.CsiException;
import dev.strata.csi.volume.Topology;
import dev.strata.csi.volume.VolumeId;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * ListVolumes across every node that registered, in volume id order. A node whose agent does not
 * answer fails the call (UNAVAILABLE) rather than leaving its volumes out: the external-attacher
 * reads a missing volume as a detached one. The page token is the id of the next
 * volume to list, so a volume deleted between two pages shifts nothing: the next page starts at
 * the first id at or after the token.
 */
final class VolumeListing {

    private final AgentDirectory agents;
    private final Topology topology;

    VolumeListing(AgentDirectory agents, Topology topology) {
        this.agents = agents;
        this.topology = topology;
    }

    ListVolumesResponse page(ListVolumesRequest request) {
        if (request.getMaxEntries() < 0) {
            throw CsiException.invalidArgument("max_entries must not be negative");
        }
        String token = request.getStartingToken();
        if (!token.isEmpty() && VolumeId.parse(token).isEmpty()) {
            throw CsiException.aborted("starting_token '" + CsiException.printable(token) + "' was not issued by this driver");
        }
        if (agents.settling()) {
            throw CsiException.unavailable("controller-server started recently; waiting for node agents to renew before listing volumes");
        }
        List<ListVolumesResponse.Entry> entries = new ArrayList<>();
        for (AgentDirectory.Agent agent : agents.registered()) {
            for (Image image : agents.stub(agent.nodeId()).listImages(ListImagesRequest.getDefaultInstance()).getImagesList()) {
                String id = new VolumeId(agent.nodeId(), image.getName()).toString();
                if (id.compareTo(token) >= 0) {
                    entries.add(ListVolumesResponse.Entry.newBuilder()
                            .setVolume(Volume.newBuilder()
                                    .setVolumeId(id)
                                    .setCapacityBytes(image.getCapacityBytes())
                                    .addAccessibleTopology(topology.of(agent.nodeId())))
                            .setStatus(ListVolumesResponse.VolumeStatus.newBuilder()
                                    .addAllPublishedNodeIds(image.getPublishedNodeIdsList()))
                            .build());
                }
            }
        }
        entries.sort(Comparator.comparing(entry -> entry.getVolume().getVolumeId()));
        int limit = request.getMaxEntries() == 0 ? entries.size() : Math.min(request.getMaxEntries(), entries.size());
        ListVolumesResponse.Builder reply = ListVolumesResponse.newBuilder().addAllEntries(entries.subList(0, limit));
        if (limit < entries.size()) {
            reply.setNextToken(entries.get(limit).getVolume().getVolumeId());
        }
        return reply.build();
    }
}
