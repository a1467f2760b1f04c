package dev.strata.csi.controller;

import csi.v1.Csi.ListVolumesRequest;
import csi.v1.Csi.ListVolumesResponse;
import csi.v1.Csi.Volume;
import dev.strata.csi.agent.api.Image;
import dev.strata.csi.agent.api.ListImagesRequest;
import dev.strata.csi.backend.local.Topology;
import dev.strata.csi.backend.local.VolumeId;
import dev.strata.csi.controller.agents.AgentDirectory;
import dev.strata.csi.rpc.CsiException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * ListVolumes: the local volumes of every node that registered and the NFS volumes of the exports
 * controller-server reaches, in volume id order. A node whose agent does not answer fails the call
 * (UNAVAILABLE) rather than leaving its volumes out: the external-attacher reads a missing volume
 * as a detached one. The page token is {@code next=<id>}, the id of the next volume to list, so a
 * volume deleted between two pages shifts nothing: the next page starts at the first id at or
 * after it.
 */
final class VolumeListing {

    private static final String TOKEN_PREFIX = "next=";

    private final AgentDirectory agents;
    private final Topology topology;

    VolumeListing(AgentDirectory agents, Topology topology) {
        this.agents = agents;
        this.topology = topology;
    }

    /** INVALID_ARGUMENT or ABORTED for a request no page can answer. */
    void checkToken(ListVolumesRequest request) {
        if (request.getMaxEntries() < 0) {
            throw CsiException.invalidArgument("max_entries must not be negative");
        }
        String token = request.getStartingToken();
        if (!token.isEmpty() && (!token.startsWith(TOKEN_PREFIX) || token.length() == TOKEN_PREFIX.length())) {
            throw CsiException.aborted("starting_token '" + CsiException.printable(token) + "' was not issued by this driver");
        }
    }

    List<ListVolumesResponse.Entry> localEntries() {
        if (agents.settling()) {
            throw CsiException.unavailable("controller-server started recently; waiting for node agents to renew before listing volumes");
        }
        List<ListVolumesResponse.Entry> entries = new ArrayList<>();
        for (AgentDirectory.Agent agent : agents.registered()) {
            for (Image image : agents.stub(agent.nodeId()).listImages(ListImagesRequest.getDefaultInstance()).getImagesList()) {
                entries.add(ListVolumesResponse.Entry.newBuilder()
                        .setVolume(Volume.newBuilder()
                                .setVolumeId(new VolumeId(agent.nodeId(), image.getName()).toString())
                                .setCapacityBytes(image.getCapacityBytes())
                                .addAccessibleTopology(topology.of(agent.nodeId())))
                        .setStatus(ListVolumesResponse.VolumeStatus.newBuilder()
                                .addAllPublishedNodeIds(image.getPublishedNodeIdsList()))
                        .build());
            }
        }
        return entries;
    }

    /** The page of {@code all} the request asks for; call {@link #checkToken} first. */
    static ListVolumesResponse page(ListVolumesRequest request, List<ListVolumesResponse.Entry> all) {
        String from = request.getStartingToken().isEmpty() ? "" : request.getStartingToken().substring(TOKEN_PREFIX.length());
        List<ListVolumesResponse.Entry> entries = all.stream()
                .filter(entry -> entry.getVolume().getVolumeId().compareTo(from) >= 0)
                .sorted(Comparator.comparing(entry -> entry.getVolume().getVolumeId()))
                .toList();
        int limit = request.getMaxEntries() == 0 ? entries.size() : Math.min(request.getMaxEntries(), entries.size());
        ListVolumesResponse.Builder reply = ListVolumesResponse.newBuilder().addAllEntries(entries.subList(0, limit));
        if (limit < entries.size()) {
            reply.setNextToken(TOKEN_PREFIX + entries.get(limit).getVolume().getVolumeId());
        }
        return reply.build();
    }
}
